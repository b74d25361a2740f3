"""Spare containers: a server of an image started ahead, so that the next launch of it finds one up.

A server in a container spends seconds importing its app before it answers (openenv
imports gradio for its web interface). So after a launch of an image, the docker backend
starts one more container of it, a spare, that waits for the next launch of that image
with the same port and no variables of its own: that launch claims the spare, already up,
by renaming it `envhub-<endpoint id>`. Labels cannot change after a container is created,
so a claimed spare is known by its name. Spares belong to the envhub instance that started
them and are removed when it stops, or by any instance once it is gone.
"""

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from docker.errors import DockerException
from docker.models.containers import Container

from core.errors import LaunchError

__all__ = ["SPARE_LABEL", "SPARE_PREFIX", "Spares"]

SPARE_LABEL = "envhub.spare"  # a container started ahead of a launch: the instance that started it
SPARE_PREFIX = "envhub-spare-"  # an unclaimed spare's name; a claimed one is named envhub-<endpoint id>

log = logging.getLogger(__name__)

Spare = tuple[Container, str]  # the container and the URL of its port


class Spares:
    """This instance's spares, by what they match (image and port): the `keep` images launched last keep one each."""

    def __init__(
        self,
        keep: int,
        run: Callable[[str, int, str], Spare],
        remove: Callable[[Container], None],
    ) -> None:
        self.keep = keep
        self._run = run  # (image, port, environment) -> a new spare container
        self._remove = remove
        self._spares: OrderedDict[str, Spare] = OrderedDict()  # key -> its spare, oldest first
        self._closed = False
        self._lock = threading.Lock()

    def claim(self, key: str, name: str) -> Spare | None:
        """The spare that matches, renamed for the endpoint that takes it; None when there is none that runs."""
        with self._lock:
            spare = self._spares.pop(key, None)
        if spare is None:
            return None
        container = spare[0]
        try:
            container.rename(name)
            container.reload()
        except DockerException as exc:
            log.warning("spare container %s could not be claimed (%s); starting a new one", container.name, exc)
            self._remove(container)
            return None
        if container.status != "running":
            self._remove(container)
            return None
        return spare

    def start_ahead(self, key: str, image: str, port: int, environment: str) -> None:
        """Start a spare for the next launch that matches key, in the background."""
        threading.Thread(target=self._start, args=(key, image, port, environment), name="spare", daemon=True).start()

    def _start(self, key: str, image: str, port: int, environment: str) -> None:
        with self._lock:
            if self._closed or key in self._spares:
                return
        try:
            spare = self._run(image, port, environment)
        except LaunchError as exc:
            log.warning("no spare container for %s: %s", image, exc.message)
            return
        with self._lock:
            if self._closed or key in self._spares:
                dropped = [spare[0]]
            else:
                self._spares[key] = spare
                dropped = [self._spares.popitem(last=False)[1][0] for _ in range(len(self._spares) - self.keep)]
        for unwanted in dropped:
            self._remove(unwanted)

    def close(self) -> None:
        """Remove every spare; none starts after this."""
        with self._lock:
            self._closed = True
            spares = list(self._spares.values())
            self._spares.clear()
        for container, _ in spares:
            try:
                self._remove(container)
            except DockerException as exc:
                log.warning("spare container %s is left: %s", container.name, exc)
