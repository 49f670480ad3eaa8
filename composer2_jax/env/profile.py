"""What an image sandbox takes from its image: working directory, user, environment and entrypoint.

Docker's image config is honoured the way Harbor's own Docker runtime honours it (its compose file runs the
main service with `command: ["sh", "-c", "sleep infinity"]`, and every agent or verifier command is a
`docker compose exec`):
- CMD is replaced by `sh -c "sleep infinity"`; an ENTRYPOINT, if the image has one, is started at every container
  start (create, fork, restore) as a detached process with those arguments, so an entrypoint that starts a
  service and then `exec "$@"` leaves the service running; no ENTRYPOINT: nothing is started.
- Commands run in WORKDIR (or a task's override) as USER (or a per-command user; "" = root), with the image's ENV
  plus the task's environment variables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from composer2_jax.env.base_images import DEFAULT_PATH

KEEPALIVE = ("sh", "-c", "sleep infinity")  # Harbor's `command:`, i.e. the CMD the entrypoint receives


@dataclasses.dataclass(frozen=True)
class ImageProfile:
    """How an image sandbox runs things (from the image config, with a task's overrides)."""

    image: str  # key of the image (Image.key)
    workdir: str = "/"  # working directory of commands and relative tool paths
    user: str = ""  # default user of commands and file tools ("" = root; a name, uid, or user:group)
    env: tuple[tuple[str, str], ...] = ()  # environment of every command (image ENV, then overrides)
    entrypoint: tuple[str, ...] = ()  # the image's ENTRYPOINT (exec form)
    image_user: str = ""  # the image's USER (set_user(sid, None) returns to it)
    command: tuple[str, ...] = ()  # a service's command (compose `command:` or its CMD); () = Harbor's KEEPALIVE

    def entrypoint_argv(self) -> tuple[str, ...]:
        """What is started detached at each container start: ENTRYPOINT + KEEPALIVE, or nothing; a service of a
        multi-container task: ENTRYPOINT + its command (Docker's rule)."""
        if self.command:
            return self.entrypoint + self.command
        return self.entrypoint + KEEPALIVE if self.entrypoint else ()

    def command_env(self, proxy_port: int, hostname: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment of a command: PATH default, the profile's variables, proxy variables, then extra."""
        env = {"PATH": DEFAULT_PATH, "HOSTNAME": hostname}
        env.update(dict(self.env))
        proxy = f"http://127.0.0.1:{proxy_port}"
        env.update({"http_proxy": proxy, "https_proxy": proxy, "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy,
                    "no_proxy": "localhost,127.0.0.1,::1", "NO_PROXY": "localhost,127.0.0.1,::1"})
        env.update(extra or {})
        return env


def profile_of(image, workdir: str | None = None, user: str | None = None,
               env: Mapping[str, str] | None = None, command: tuple[str, ...] | None = None) -> ImageProfile:
    """The profile of an `images.Image`, with optional overrides (workdir, user, extra environment, a service's
    command)."""
    cfg = image.config
    return ImageProfile(image.key, workdir or cfg.workdir or "/", cfg.user if user is None else user,
                        tuple(cfg.env) + tuple((env or {}).items()), tuple(cfg.entrypoint), cfg.user,
                        tuple(command or ()))
