"""Reading a Space's Dockerfile as Docker reads it: whitespace after a keyword, heredocs, `# escape=`, ARGs with
several names, variables with defaults, and what a COPY of the repo brings."""

from hosting.runtimes.dockerfiles import needs_docker, parse_dockerfile, python_of, served


def test_a_run_whose_keyword_is_followed_by_a_tab_is_read() -> None:
    dockerfile = parse_dockerfile("FROM python:3.11-slim\nRUN\tapt-get update && apt-get install -y libosmesa6-dev\n")

    assert dockerfile.system_packages == ["libosmesa6-dev"]


def test_what_a_heredoc_installs_is_seen_and_its_lines_are_no_instructions() -> None:
    dockerfile = parse_dockerfile(
        "# syntax=docker/dockerfile:1.7\n"
        "FROM python:3.11-slim\n"
        "RUN <<EOF\n"
        "set -eux\n"
        "apt-get update\n"
        "apt-get install -y --no-install-recommends \\\n"
        "    libsndfile1 libgl1-mesa-glx\n"
        "pip install --no-cache-dir 'gymnasium==1.0.0'\n"
        "EOF\n"
        "RUN bash <<-SETUP\n"
        "\tapk add --no-cache chromium\n"
        "\tSETUP\n"
        "RUN python3 <<PY\n"
        "import subprocess\n"
        "CMD = 'apt-get install -y not-a-shell-line'\n"
        "PY\n"
        "COPY <<EOF /app/settings.toml\n"
        "WORKDIR = '/nowhere'\n"
        "EOF\n"
        "COPY . /app\n"
        "WORKDIR /app\n"
        'CMD ["uvicorn", "server.app:app", "--host", "0.0.0.0", "--port", "7860"]\n'
    )

    assert dockerfile.system_packages == ["libsndfile1", "libgl1-mesa-glx", "chromium"]
    assert dockerfile.python_packages == ["gymnasium==1.0.0"]
    assert dockerfile.copies == [("", "/app")]  # the heredoc's file is not the repo's
    assert (dockerfile.workdir, dockerfile.command[:2]) == ("/app", ["uvicorn", "server.app:app"])
    reason = needs_docker(dockerfile)
    assert reason is not None and "installs system packages (libsndfile1, libgl1-mesa-glx" in reason


def test_an_escape_directive_changes_the_line_continuation() -> None:
    dockerfile = parse_dockerfile(
        "# escape=`\n"
        "FROM python:3.11-slim\n"
        "RUN apt-get update && apt-get install -y `\n"
        "    libosmesa6-dev `\n"
        "    && rm -rf /var/lib/apt/lists/*\n"
        "WORKDIR /srv\n"
    )

    assert dockerfile.system_packages == ["libosmesa6-dev"]
    assert dockerfile.workdir == "/srv"


def test_a_blank_line_inside_a_continuation_does_not_end_the_instruction() -> None:
    dockerfile = parse_dockerfile("FROM python:3.11-slim\nRUN apt-get update && \\\n\n    apt-get install -y ffmpeg\n")

    assert dockerfile.system_packages == ["ffmpeg"]


def test_an_arg_with_several_names_gives_each_its_default() -> None:
    dockerfile = parse_dockerfile(
        "ARG PYTHON=3.12 VARIANT=slim-bookworm\n"
        "FROM python:${PYTHON}-${VARIANT}\n"
        'ARG CORE=0.2.1 EXTRA="numpy<2"\n'
        "RUN pip install openenv-core==${CORE} $EXTRA\n"
    )

    assert dockerfile.bases == ["python:3.12-slim-bookworm"]
    assert python_of(dockerfile) == "3.12"
    assert dockerfile.python_packages == ["openenv-core==0.2.1", "numpy<2"]


def test_variables_with_defaults_are_filled_in_as_docker_does() -> None:
    dockerfile = parse_dockerfile(
        "ARG PYTHON\n"
        "FROM python:${PYTHON:-3.11}-slim\n"
        "ENV APP_HOME=${APP_HOME:-/srv/app} DEBUG=${DEBUG:+1}\n"
        "ENV PYTHONPATH=${APP_HOME}/src${PYTHONPATH:+:$PYTHONPATH}\n"
        "WORKDIR $APP_HOME\n"
        "COPY src/ ${APP_HOME}/src/\n"
        'CMD ["uvicorn", "count_env.server.app:app"]\n'
    )

    assert dockerfile.bases == ["python:3.11-slim"]
    assert dockerfile.workdir == "/srv/app"
    assert dockerfile.pythonpath == ["/srv/app/src"]
    assert dockerfile.copied_from("/srv/app/src/count_env", lambda path: True) == "src/count_env"
    assert served(dockerfile) is not None


def test_a_global_arg_without_default_leaves_the_base_unknown() -> None:
    dockerfile = parse_dockerfile("ARG BASE\nFROM $BASE\n")

    assert needs_docker(dockerfile) == "its Dockerfile builds FROM $BASE, a build argument without a default"


def test_a_stage_sees_a_global_arg_only_once_it_names_it() -> None:
    dockerfile = parse_dockerfile(
        "ARG CORE=0.2.1\nFROM python:3.11-slim\nRUN pip install openenv-core==${CORE:-0.1.0}\n"
        "FROM python:3.11-slim\nARG CORE\nRUN pip install openenv-core==${CORE:-0.1.0}\n"
    )

    assert dockerfile.python_packages == ["openenv-core==0.1.0", "openenv-core==0.2.1"]


def test_env_fills_in_from_the_values_before_it() -> None:
    dockerfile = parse_dockerfile("FROM python:3.11\nENV ROOT=/a\nENV ROOT=/b PYTHONPATH=$ROOT\n")

    assert dockerfile.pythonpath == ["/a"]
