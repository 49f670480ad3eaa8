"""A per-run certificate authority for the egress proxy's mirror: it signs a certificate for each mirrored https host.

Only hosts that the mirror map serves are intercepted (env/mirrors.py); every other CONNECT is a byte tunnel, so TLS to
the package registries is never terminated here. The CA's key is generated when first needed, lives in this
process (and in a 0700 temporary directory that `close` removes), is valid for two days and is trusted only by the
sandboxes of a verifier phase (bench/verifier_net.py installs its certificate there and removes it afterwards).
"""

from __future__ import annotations

import datetime
import os
import secrets
import shutil
import ssl
import tempfile
import threading


class PerRunCA:
    """A fresh CA (ECDSA P-256) and the server contexts of the hosts it has signed for."""

    def __init__(self, name: str = "composer2 egress mirror CA"):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._x509, self._hashes, self._ser, self._ec, self._oid = x509, hashes, serialization, ec, NameOID
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} {secrets.token_hex(4)}")])
        self._name = subject
        self._cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
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
        self._dir = tempfile.mkdtemp(prefix="composer2-mirror-ca-")
        os.chmod(self._dir, 0o700)
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    @property
    def pem(self) -> str:
        """The CA certificate (PEM): what a sandbox must trust to accept the mirror's certificates."""
        return self._cert.public_bytes(self._ser.Encoding.PEM).decode()

    def server_context(self, host: str) -> ssl.SSLContext:
        """A TLS server context presenting a certificate for host, signed by this CA (made once per host)."""
        host = host.lower().rstrip(".")
        with self._lock:
            ctx = self._contexts.get(host)
            if ctx is None:
                ctx = self._contexts[host] = self._make_context(host)
            return ctx

    def _make_context(self, host: str) -> ssl.SSLContext:
        """Sign a leaf for host and load it into a server context."""
        x509, NameOID = self._x509, self._oid
        import ipaddress

        key = self._ec.generate_private_key(self._ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        try:
            san = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            san = x509.DNSName(host)
        cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
                .issuer_name(self._name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([san]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                               critical=False)
                .sign(self._key, self._hashes.SHA256()))
        stem = os.path.join(self._dir, secrets.token_hex(8))
        with open(stem + ".pem", "wb") as f:
            f.write(cert.public_bytes(self._ser.Encoding.PEM) + self._cert.public_bytes(self._ser.Encoding.PEM))
        fd = os.open(stem + ".key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.private_bytes(self._ser.Encoding.PEM, self._ser.PrivateFormat.PKCS8,
                                      self._ser.NoEncryption()))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(stem + ".pem", stem + ".key")
        return ctx

    def close(self) -> None:
        """Delete the key files (the contexts already loaded keep working until dropped)."""
        shutil.rmtree(self._dir, ignore_errors=True)
