"""A desktop with a browser inside a sandbox: the image recipe, the guest driver and the model's browser tools.

    image = desktop_image(ImageBuilder())                  # Xvfb + openbox + Chromium on the Debian bookworm base
    env = DesktopEnvironment(Environment())                # the coding tools plus browser_* and screenshot
    sid = env.fork(env.import_image(image))
    obs = env.call(sid, "browser_open", {"url": "http://127.0.0.1:8000/"})
    obs = env.call(sid, "screenshot", {})                  # obs.fields["artifacts"][0]: the PNG (base64)

See docs/env.md, "Desktop".
"""

from composer2_jax.env.desktop.host import (
    IMAGE_CONTEXT,
    DesktopConfig,
    DesktopEnvironment,
    desktop_image,
    png_size,
)

__all__ = ["IMAGE_CONTEXT", "DesktopConfig", "DesktopEnvironment", "desktop_image", "png_size"]
