"""Probes of real-platformdirs-pictures: what the workspace's platformdirs answers (bench/verdict_runner.py).

Fail-to-pass (platformdirs 3.3.0, "Add user_pictures_dir"): the pictures directory on every platform -- Unix from
user-dirs.dirs, then XDG_PICTURES_DIR, then ~/Pictures; macOS ~/Pictures; Windows CSIDL_MYPICTURES (registry name
"My Pictures", shell constant 39, %USERPROFILE%\\Pictures without either); Android /storage/emulated/0/Pictures --
with its Path variant, the module functions, `__all__` and `python -m platformdirs`. Pass-to-pass: the other
directories of every platform as platformdirs 3.2.0 answered them (the Unix documents directory shares the new
lookup upstream).

Every probe fixes HOME and the XDG variables itself, so the answers do not depend on the child's private home.
"""

import os
import sys
import types

HOME = "/home/probe"
XDG = ("XDG_DATA_HOME", "XDG_DATA_DIRS", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "XDG_CACHE_HOME", "XDG_STATE_HOME",
       "XDG_RUNTIME_DIR", "XDG_DOCUMENTS_DIR", "XDG_PICTURES_DIR", "USERPROFILE", "APPDATA", "LOCALAPPDATA",
       "ALLUSERSPROFILE", "ANDROID_DATA", "ANDROID_ROOT")


def _pd(ctx, **env):
    """The workspace's platformdirs (src layout) with a fixed environment: HOME, an empty config home, env."""
    root = ctx.path("src")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    for k in XDG:
        os.environ.pop(k, None)
    os.environ["HOME"] = HOME
    empty = os.path.join(ctx.tmp, "empty-config")
    os.makedirs(empty, exist_ok=True)
    os.environ["XDG_CONFIG_HOME"] = empty
    os.environ.update(env)
    ctx.load("platformdirs.windows")  # picks its folder lookup now, before a probe fakes winreg or ctypes.windll
    pd = ctx.load("platformdirs")
    if not os.path.realpath(pd.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("platformdirs came from %s, not the workspace" % pd.__file__)
    return pd


def _user_dirs(ctx, name, text):
    """A config home holding user-dirs.dirs with text; its path."""
    folder = os.path.join(ctx.tmp, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "user-dirs.dirs"), "w") as f:
        f.write(text)
    return folder


def _both(obj, name):
    """obj.NAME_dir, str(obj.NAME_path) and the path's type name."""
    d, p = getattr(obj, name + "_dir"), getattr(obj, name + "_path")
    return [d, str(p), type(p).__name__]


def probe_unix_pictures_default(ctx):
    _pd(ctx)
    unix = ctx.load("platformdirs.unix")
    return _both(unix.Unix(), "user_pictures") + _both(unix.Unix("app", "Acme", "1.0"), "user_pictures")


def probe_unix_pictures_env(ctx):
    _pd(ctx, XDG_PICTURES_DIR="/srv/pics")
    unix = ctx.load("platformdirs.unix")
    out = [unix.Unix().user_pictures_dir]
    os.environ["XDG_PICTURES_DIR"] = "  /srv/padded pics  "
    out.append(unix.Unix().user_pictures_dir)
    os.environ["XDG_PICTURES_DIR"] = "   "
    out.append(unix.Unix().user_pictures_dir)
    return out


def probe_unix_pictures_user_dirs_file(ctx):
    cfg = _user_dirs(ctx, "cfg-pictures", 'XDG_DESKTOP_DIR="$HOME/Desktop"\nXDG_PICTURES_DIR="$HOME/Bilder"\n')
    _pd(ctx, XDG_CONFIG_HOME=cfg, XDG_PICTURES_DIR="/srv/ignored")
    unix = ctx.load("platformdirs.unix")
    out = [unix.Unix().user_pictures_dir, str(unix.Unix().user_pictures_path)]
    cfg2 = _user_dirs(ctx, "cfg-absolute", 'XDG_PICTURES_DIR="/mnt/photos"\n')
    os.environ["XDG_CONFIG_HOME"] = cfg2
    return out + [unix.Unix().user_pictures_dir]


def probe_unix_pictures_file_without_key(ctx):
    cfg = _user_dirs(ctx, "cfg-docs-only", 'XDG_DOCUMENTS_DIR="$HOME/Dokumente"\n')
    _pd(ctx, XDG_CONFIG_HOME=cfg)
    unix = ctx.load("platformdirs.unix")
    out = [unix.Unix().user_pictures_dir, unix.Unix().user_documents_dir]
    os.environ["XDG_PICTURES_DIR"] = "/srv/from-env"
    return out + [unix.Unix().user_pictures_dir]


def probe_module_functions(ctx):
    pd = _pd(ctx)
    out = [pd.user_pictures_dir(), str(pd.user_pictures_path()), type(pd.user_pictures_path()).__name__,
           "user_pictures_dir" in pd.__all__, "user_pictures_path" in pd.__all__]
    os.environ["XDG_PICTURES_DIR"] = "/srv/module"
    return out + [pd.user_pictures_dir(), pd.PlatformDirs("x").user_pictures_dir]


def probe_main_lists_pictures(ctx):
    _pd(ctx)
    main = ctx.load("platformdirs.__main__")
    r = ctx.run([sys.executable, "-I", "-c", "import sys, runpy; sys.path.append('src'); "
                 "runpy.run_module('platformdirs', run_name='__main__')"],
                env={"HOME": HOME, "XDG_CONFIG_HOME": os.path.join(ctx.tmp, "empty-config")}, timeout=30)
    lines = [ln.strip() for ln in r["stdout"].splitlines() if "pictures" in ln]
    return ["user_pictures_dir" in main.PROPS, r["returncode"], lines]


def probe_macos_pictures(ctx):
    _pd(ctx)
    macos = ctx.load("platformdirs.macos")
    return _both(macos.MacOS(), "user_pictures") + [macos.MacOS("app", version="2").user_pictures_dir]


def probe_windows_pictures_env(ctx):
    _pd(ctx, USERPROFILE="/users/probe")
    win = ctx.load("platformdirs.windows")
    return _both(win.Windows(), "user_pictures") + [win.get_win_folder_from_env_vars("CSIDL_MYPICTURES"),
                                                   win.Windows("app", "Acme").user_pictures_dir]


def probe_windows_registry_name(ctx):
    _pd(ctx)
    win = ctx.load("platformdirs.windows")
    asked = []
    fake = types.ModuleType("winreg")
    fake.HKEY_CURRENT_USER = "HKCU"
    fake.OpenKey = lambda root, path: (root, path)
    fake.QueryValueEx = lambda key, name: (asked.append(name) or "C:\\Shell\\" + name, 1)
    saved, platform = sys.modules.get("winreg"), sys.platform
    sys.modules["winreg"], sys.platform = fake, "win32"  # the lookup refuses to run elsewhere
    try:
        got = [win.get_win_folder_from_registry(n) for n in ("CSIDL_MYPICTURES", "CSIDL_PERSONAL", "CSIDL_APPDATA")]
        unknown = ctx.message(ValueError, win.get_win_folder_from_registry, "CSIDL_NOPE")
    finally:
        sys.platform = platform
        if saved is None:
            sys.modules.pop("winreg", None)
        else:
            sys.modules["winreg"] = saved
    return [got, asked, unknown]


def probe_windows_ctypes_constant(ctx):
    _pd(ctx)
    win = ctx.load("platformdirs.windows")
    ctypes = ctx.load("ctypes")

    class Shell32:
        @staticmethod
        def SHGetFolderPathW(owner, csidl, token, flags, buf):  # noqa: N802 - the Windows API's name
            buf.value = "C:\\CSIDL\\%d" % csidl

    had = hasattr(ctypes, "windll")
    ctypes.windll = types.SimpleNamespace(shell32=Shell32, kernel32=None)
    try:
        return [win.get_win_folder_via_ctypes(n) for n in ("CSIDL_MYPICTURES", "CSIDL_PERSONAL", "CSIDL_LOCAL_APPDATA")]
    finally:
        if not had:
            del ctypes.windll


def probe_android_pictures(ctx):
    _pd(ctx)
    android = ctx.load("platformdirs.android")
    return _both(android.Android(), "user_pictures") + [android.Android("app").user_pictures_dir]


def probe_every_platform_complete(ctx):
    _pd(ctx)
    classes = [("platformdirs.unix", "Unix"), ("platformdirs.macos", "MacOS"), ("platformdirs.windows", "Windows"),
               ("platformdirs.android", "Android")]
    out = []
    for mod, name in classes:
        cls = getattr(ctx.load(mod), name)
        out.append([name, sorted(cls.__abstractmethods__)])
    api = ctx.load("platformdirs.api")
    out.append(sorted(n for n in api.PlatformDirsABC.__abstractmethods__ if "pictures" in n or "documents" in n))
    return out


def probe_unix_documents(ctx):
    _pd(ctx)
    unix = ctx.load("platformdirs.unix")
    out = [unix.Unix().user_documents_dir]
    os.environ["XDG_DOCUMENTS_DIR"] = " /srv/docs "
    out.append(unix.Unix().user_documents_dir)
    cfg = _user_dirs(ctx, "cfg-docs", 'XDG_DOCUMENTS_DIR="$HOME/Docs"\n')
    os.environ["XDG_CONFIG_HOME"] = cfg
    return out + [unix.Unix().user_documents_dir, str(unix.Unix().user_documents_path)]


def probe_unix_app_dirs(ctx):
    _pd(ctx, XDG_RUNTIME_DIR="/run/user/1234", XDG_DATA_DIRS="/usr/local/share:/usr/share")
    unix = ctx.load("platformdirs.unix")
    d = unix.Unix("app", "Acme", "1.0")
    m = unix.Unix("app", multipath=True)
    os.environ.pop("XDG_CONFIG_HOME")
    return [d.user_data_dir, d.user_config_dir, d.user_cache_dir, d.user_state_dir, d.user_log_dir,
            d.user_runtime_dir, d.site_data_dir, m.site_data_dir, m.site_config_dir, d.site_cache_dir]


def probe_macos_app_dirs(ctx):
    _pd(ctx)
    os.environ.pop("XDG_CONFIG_HOME")
    macos = ctx.load("platformdirs.macos")
    d = macos.MacOS("app", version="1.0")
    return [d.user_data_dir, d.site_data_dir, d.user_config_dir, d.site_config_dir, d.user_cache_dir,
            d.site_cache_dir, d.user_state_dir, d.user_log_dir, d.user_documents_dir, d.user_runtime_dir]


def probe_windows_app_dirs(ctx):
    _pd(ctx, USERPROFILE="/users/probe", APPDATA="/users/probe/roaming", LOCALAPPDATA="/users/probe/local",
        ALLUSERSPROFILE="/programdata")
    win = ctx.load("platformdirs.windows")
    d = win.Windows("app", "Acme", "1.0")
    r = win.Windows("app", "Acme", roaming=True)
    return [d.user_data_dir, r.user_data_dir, d.site_data_dir, d.user_cache_dir, d.site_cache_dir, d.user_log_dir,
            d.user_documents_dir, win.Windows("app", False).user_data_dir]


def probe_android_app_dirs(ctx):
    _pd(ctx)
    android = ctx.load("platformdirs.android")
    android._android_folder = lambda: "/data/user/0/com.probe.app"  # noqa: SLF001 - the app folder pyjnius finds
    d = android.Android("app", version="1.0")
    return [d.user_data_dir, d.user_config_dir, d.user_cache_dir, d.user_log_dir, d.user_documents_dir,
            d.user_runtime_dir]
