"""A throwaway certificate authority for the interceptor, made with the ``openssl`` command.

One EC key pair for the CA and one leaf certificate naming every vendor host the interceptor
plays (``subjectAltName``), valid for a day. The CLIs trust it through their own variables
(claude and gemini ``NODE_EXTRA_CA_CERTS``, codex ``CODEX_CA_CERTIFICATE``) and OLP through
``SSL_CERT_FILE``.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: The hosts the interceptor answers for (anything else CONNECTed to is refused).
HOSTS = ("platform.claude.com", "api.anthropic.com", "claude.ai", "console.anthropic.com",
         "statsig.anthropic.com", "auth.openai.com", "chatgpt.com", "api.openai.com",
         "ab.chatgpt.com", "oauth2.googleapis.com", "www.googleapis.com",
         "cloudcode-pa.googleapis.com")


@dataclass(frozen=True, slots=True)
class TestCa:
    ca_file: Path  # the CA certificate (PEM): what clients trust
    cert_file: Path  # the leaf certificate (PEM) for every host in HOSTS
    key_file: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        return context


def make_ca(directory: Path) -> TestCa:
    """Write a CA and a leaf certificate for :data:`HOSTS` into ``directory`` (blocks on a
    few ``openssl`` runs, about 50 ms)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the interceptor needs the `openssl` command")
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = directory / "ca.key", directory / "ca.pem"
    key, csr, cert = directory / "leaf.key", directory / "leaf.csr", directory / "leaf.pem"
    ext = directory / "leaf.ext"
    ext.write_text("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=serverAuth\nsubjectAltName="
                   + ",".join(f"DNS:{h}" for h in HOSTS) + "\n")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=30)

    run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(ca_key))
    run("req", "-x509", "-new", "-key", str(ca_key), "-sha256", "-days", "2",
        "-subj", "/CN=OLP test interceptor CA", "-out", str(ca_cert),
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key))
    run("req", "-new", "-key", str(key), "-subj", f"/CN={HOSTS[0]}", "-out", str(csr))
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "1", "-sha256", "-extfile", str(ext), "-out", str(cert))
    return TestCa(ca_cert, cert, key)
