"""The verifier phase's network: the package registries and the mirror map, whatever the agent was allowed.

Harbor's `[environment] allow_internet` governs what the AGENT's commands may reach; published tests/test.sh scripts
install their own tools at verification time (`apt-get install -y curl`, `curl -LsSf https://astral.sh/uv/0.9.5/
install.sh | sh`, `uvx -w pytest==8.4.1 pytest ...`, `pip install pytest`). So while an image task's verifier runs:

- egress is decided by the registries policy (env/registries.py: the pip indexes, apt sources and npm registry this
  host is configured for; GET, HEAD and CONNECT on their ports), and the mirror map answers its URLs (env/mirrors.py:
  the uv installer and uv's release tarballs by default); every event is logged with phase "verifier";
- inside the sandbox, as root: the per-run mirror CA is added to the trust store (/usr/local/share/ca-certificates and
  the system bundle, so curl, wget, apt and Python trust the mirror's https answers), and a bundle of the system's
  certificates + the host's extra CAs (/usr/local/share/ca-certificates on the host: the ones an intercepting egress
  proxy needs) + the mirror CA is written to a fresh directory; apt gets an Acquire::http(s)::Proxy file;
- the verifier's environment points every client at the proxy and that bundle: http(s)_proxy (already set for every
  command), SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, PIP_CERT, NODE_EXTRA_CA_CERTS, npm_config_proxy /
  https_proxy / registry, and the host's network index URLs (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, UV_INDEX_URL,
  UV_EXTRA_INDEX_URL) when its pip configuration names any.

`leave` removes all of it (trust store entries, apt file, bundle) and returns the sandbox to its own policy with the
mirror off: the next step's agent (multi-step tasks) is back under allow_internet, without the mirror CA.
"""

from __future__ import annotations

import dataclasses
import glob
import secrets
import shlex

from composer2_jax.env.registries import Registries, host_registries

VERIFIER, AGENT = "verifier", "agent"
TRUST_FILE = "/usr/local/share/ca-certificates/composer2-verifier-mirror.crt"
APT_FILE = "/etc/apt/apt.conf.d/99composer2-verifier-proxy"
BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")
MARK = "# composer2-verifier-mirror-ca"
HOST_EXTRA_CAS = "/usr/local/share/ca-certificates"


@dataclasses.dataclass(frozen=True)
class VerifierNet:
    """What `enter` set up in one sandbox: the verifier's extra environment and the directory to remove."""

    env: dict[str, str]
    dir: str
    ca_pem: str


def host_extra_cas(root: str = HOST_EXTRA_CAS) -> str:
    """The host's extra CA certificates (PEM), as installed by update-ca-certificates from root."""
    pems = []
    for path in sorted(glob.glob(f"{root}/**/*.crt", recursive=True)):
        try:
            text = open(path).read()
        except OSError:
            continue
        if "-----BEGIN CERTIFICATE-----" in text:
            pems.append(text.strip() + "\n")
    return "".join(pems)


def client_env(reg: Registries, bundle: str, extra_pem: str, proxy: str) -> dict[str, str]:
    """The verifier's environment: proxy, CA bundle and the host's network index URLs for pip, uv, npm, curl."""
    env = {"SSL_CERT_FILE": bundle, "REQUESTS_CA_BUNDLE": bundle, "CURL_CA_BUNDLE": bundle, "PIP_CERT": bundle,
           "NODE_EXTRA_CA_CERTS": extra_pem}
    if proxy:
        env.update(npm_config_proxy=proxy, npm_config_https_proxy=proxy)
    if reg.npm_registry:
        env["npm_config_registry"] = reg.npm_registry
    if reg.pip_index:
        env.update(PIP_INDEX_URL=reg.pip_index, UV_INDEX_URL=reg.pip_index)
    if reg.pip_extra:
        env.update(PIP_EXTRA_INDEX_URL=" ".join(reg.pip_extra), UV_EXTRA_INDEX_URL=" ".join(reg.pip_extra))
    return env


def _heredoc(path: str, text: str, tag: str = "__PEM__") -> str:
    """A shell command writing text to path."""
    return f"cat > {path} <<'{tag}'\n{text}{tag}\n"


def enter(env, sid: str, registries: Registries | None = None, phase: str = VERIFIER) -> VerifierNet:
    """Switch sandbox sid to the verifier's network (events labelled `phase`: "verifier", or "verifier:<step>") and
    set up its trust store, bundle and apt proxy (as root)."""
    reg = registries or host_registries()
    env.set_phase(sid, phase, reg.policy(), mirrors=True)
    ca = env.mirror_ca_pem()
    extra = ca + host_extra_cas()
    d = f"/tmp/.verifier-net-{secrets.token_hex(8)}"
    bundles = " ".join(BUNDLES)
    script = (
        f"set -e\nmkdir -p {d}\nchmod 755 {d}\n" + _heredoc(f"{d}/extra.pem", extra)
        + _heredoc(f"{d}/mirror-ca.pem", ca)
        + f"for b in {bundles}; do if [ -f \"$b\" ]; then cat \"$b\" >> {d}/ca.pem; break; fi; done\n"
        f"cat {d}/extra.pem >> {d}/ca.pem\nchmod 644 {d}/ca.pem {d}/extra.pem {d}/mirror-ca.pem\n"
        f"mkdir -p {shlex.quote(TRUST_FILE.rsplit('/', 1)[0])} && cp {d}/mirror-ca.pem {TRUST_FILE} || true\n"
        f"for b in {bundles}; do if [ -f \"$b\" ]; then {{ echo '{MARK} begin'; cat {d}/mirror-ca.pem; "
        f"echo '{MARK} end'; }} >> \"$b\" || true; fi; done\n"
        f"if [ -d /etc/apt/apt.conf.d ] && [ -n \"${{http_proxy:-}}\" ]; then printf 'Acquire::http::Proxy \"%s\";\\n"
        f"Acquire::https::Proxy \"%s\";\\n' \"$http_proxy\" \"$http_proxy\" > {APT_FILE}; fi\n"
        "printf '%s' \"${http_proxy:-}\"\n")
    try:
        r = env.exec(sid, script, timeout_s=60, user="")
        if r["exit_code"] != 0:
            raise RuntimeError(f"setting up the verifier's network failed (exit {r['exit_code']}): "
                               f"{(r['stdout'] + r['stderr'])[-500:]}")
    except Exception:
        env.set_phase(sid, AGENT)
        raise
    return VerifierNet(client_env(reg, f"{d}/ca.pem", f"{d}/extra.pem", r["stdout"].strip()), d, ca)


def leave(env, sid: str, net: VerifierNet) -> None:
    """Undo `enter`: the mirror CA out of the trust store, the apt proxy file and the bundle removed; the sandbox's
    own policy back, mirror off, phase "agent"."""
    first = next((line for line in net.ca_pem.splitlines()[1:] if line.strip()), "")
    bundles = " ".join(BUNDLES)
    script = (f"rm -f {APT_FILE} {TRUST_FILE}\n"
              f"for b in {bundles}; do [ -f \"$b\" ] || continue; "
              f"if grep -q '^{MARK} begin' \"$b\"; then sed -i '/^{MARK} begin/,/^{MARK} end/d' \"$b\"; fi; "
              f"if grep -qF {shlex.quote(first)} \"$b\" && command -v update-ca-certificates >/dev/null; then "
              "update-ca-certificates >/dev/null 2>&1 || true; fi; done\n"
              f"rm -rf {net.dir}\n")
    try:
        env.exec(sid, script, timeout_s=60, user="")
    finally:
        env.set_phase(sid, AGENT)
