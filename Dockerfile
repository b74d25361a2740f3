# envhub as a container (and as a Docker Space): the API and UI on port 7860.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# Spaces run containers as uid 1000.
RUN useradd --create-home --uid 1000 user
WORKDIR /home/user/app
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY --chown=user app/ app/
COPY --chown=user catalog/ catalog/
COPY --chown=user conformance/ conformance/
COPY --chown=user core/ core/
COPY --chown=user envclient/ envclient/
COPY --chown=user evals/ evals/
COPY --chown=user gateway/ gateway/
COPY --chown=user hosting/ hosting/
COPY --chown=user migrations/ migrations/
COPY --chown=user protocol/ protocol/
COPY --chown=user rollout/ rollout/
COPY --chown=user spaces_templates/ spaces_templates/
RUN mkdir -p data && chown user data
USER user
EXPOSE 7860
CMD ["python", "-m", "app", "serve", "--host", "0.0.0.0", "--port", "7860"]
