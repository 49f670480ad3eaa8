"""A per-run certificate authority for the egress proxy's mirror: it signs a certificate for each mirrored https host.

Only hosts that the mirror map serves are intercepted (env/mirrors.py); every other CONNECT is a byte tunnel, so TLS to
the package registries is never terminated here. The CA's key is generated when first needed, lives in this
process (and in a 0700 temporary directory that `close` removes), is made with the `cryptography` package when it is
installed and with the openssl CLI otherwise, is valid for two days and is trusted only by the
sandboxes of a verifier phase (verify/network.py installs its certificate there and removes it afterwards).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
import threading


class PerRunCA:
    """A fresh CA (ECDSA P-256) and the server contexts of the hosts it has signed for.

    backend: "cryptography" (the Python package), "openssl" (the CLI), or "auto" (the package when importable).
    """

    def __init__(self, name: str = "composer2 egress mirror CA", backend: str = "auto"):
        if backend == "auto":
            try:
                import cryptography  # noqa: F401
                backend = "cryptography"
            except ImportError:
                backend = "openssl"
        if backend not in ("cryptography", "openssl"):
            raise ValueError(f"backend={backend!r}; expected auto, cryptography or openssl")
        self.backend = backend
        self._dir = tempfile.mkdtemp(prefix="composer2-mirror-ca-")
        os.chmod(self._dir, 0o700)
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()
        cn = f"{name} {secrets.token_hex(4)}"
        try:
            self._pem = self._ca_cryptography(cn) if backend == "cryptography" else self._ca_openssl(cn)
        except Exception:
            self.close()
            raise

    @property
    def pem(self) -> str:
        """The CA certificate (PEM): what a sandbox must trust to accept the mirror's certificates."""
        return self._pem

    def server_context(self, host: str) -> ssl.SSLContext:
        """A TLS server context presenting a certificate for host, signed by this CA (made once per host)."""
        host = host.lower().rstrip(".")
        with self._lock:
            ctx = self._contexts.get(host)
            if ctx is None:
                stem = os.path.join(self._dir, secrets.token_hex(8))
                if self.backend == "cryptography":
                    self._leaf_cryptography(host, stem)
                else:
                    self._leaf_openssl(host, stem)
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                ctx.load_cert_chain(stem + ".pem", stem + ".key")
                self._contexts[host] = ctx
            return ctx

    def close(self) -> None:
        """Delete the key files (the contexts already loaded keep working until dropped)."""
        shutil.rmtree(self._dir, ignore_errors=True)

    # ---------------------------------------------------------------------------------------- cryptography

    def _ca_cryptography(self, cn: str) -> str:
        """Make the CA with the cryptography package; its PEM."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        self._cert = (x509.CertificateBuilder().subject_name(self._name).issuer_name(self._name)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(hours=1))
                      .not_valid_after(now + datetime.timedelta(days=2))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False, encipher_only=False,
                                                   decipher_only=False), critical=True)
                      .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
                      .sign(self._key, hashes.SHA256()))
        return self._cert.public_bytes(serialization.Encoding.PEM).decode()

    def _leaf_cryptography(self, host: str, stem: str) -> None:
        """Sign a leaf for host; stem.pem (leaf + CA) and stem.key."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
                .issuer_name(self._name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([_san(x509, host)]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                               critical=False)
                .sign(self._key, hashes.SHA256()))
        with open(stem + ".pem", "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM) + self._pem.encode())
        _write_private(stem + ".key", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()))

    # ---------------------------------------------------------------------------------------- openssl CLI

    def _openssl(self, *args: str) -> None:
        """Run the openssl CLI in the key directory; RuntimeError with its output on failure."""
        r = subprocess.run([shutil.which("openssl") or "openssl", *args], cwd=self._dir, capture_output=True,
                           text=True, timeout=60, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"openssl {args[0]} failed (exit {r.returncode}): {(r.stdout + r.stderr)[-500:]}")

    def _ca_openssl(self, cn: str) -> str:
        """Make the CA with the openssl CLI; its PEM."""
        os.close(os.open(os.path.join(self._dir, "ca.key"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", f"/CN={cn}",
                      "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature")
        with open(os.path.join(self._dir, "ca.pem")) as f:
            return f.read()

    def _leaf_openssl(self, host: str, stem: str) -> None:
        """Sign a leaf for host with the openssl CLI; stem.pem (leaf + CA) and stem.key."""
        name = os.path.basename(stem)
        try:
            ipaddress.ip_address(host)
            san = f"IP:{host}"
        except ValueError:
            san = f"DNS:{host}"
        with open(stem + ".ext", "w") as f:
            f.write(f"subjectAltName={san}\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n"
                    "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n")
        os.close(os.open(stem + ".key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self._openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={host}")
        self._openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial",
                      str(int.from_bytes(secrets.token_bytes(15), "big")), "-days", "1", "-extfile", f"{name}.ext",
                      "-out", f"{name}.leaf")
        with open(stem + ".leaf") as f, open(stem + ".pem", "w") as out:
            out.write(f.read() + self._pem)


def _san(x509, host: str):
    """The subjectAltName entry of host (an IP address or a DNS name)."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write_private(path: str, data: bytes) -> None:
    """Write a key file readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
