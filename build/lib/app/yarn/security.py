"""How the sidecar proves itself to the RM and trusts it: TLS and Kerberos (SPNEGO).

* TLS: an ``https://`` RM is verified against ``YARN_SIDECAR_RM_CA_BUNDLE`` (or the system's
  trust store); ``YARN_SIDECAR_RM_CLIENT_CERT`` / ``_KEY`` add a client certificate.
* Kerberos: with ``YARN_SIDECAR_RM_AUTH=kerberos`` every request carries an SPNEGO
  ``Authorization: Negotiate`` token for ``HTTP/<rm-host>``, from credentials acquired from the
  keytab (``YARN_SIDECAR_RM_KEYTAB``) for ``YARN_SIDECAR_RM_PRINCIPAL`` into a private in-memory
  cache. Credentials are acquired again when they have less than ``RENEW_BEFORE_S`` left, so a
  long-running sidecar never presents an expired ticket.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import httpx

from app.settings import Settings

RENEW_BEFORE_S = 600


def rm_tls(
    ca_bundle: Path | None, client_cert: Path | None, client_key: Path | None
) -> ssl.SSLContext | bool:
    """``verify=`` for httpx: the default trust store, or one built from the given files."""
    if ca_bundle is None and client_cert is None:
        return True
    ctx = ssl.create_default_context(cafile=str(ca_bundle) if ca_bundle else None)
    if client_cert is not None:
        ctx.load_cert_chain(str(client_cert), str(client_key) if client_key else None)
    return ctx


class KerberosAuth(httpx.Auth):
    """SPNEGO for httpx from a keytab (python-gssapi over MIT krb5)."""

    def __init__(self, principal: str, keytab: Path, *, service: str = "HTTP") -> None:
        self.principal = principal
        self.keytab = keytab
        self.service = service
        self._lock = threading.Lock()
        self._creds: Any = None
        # One private in-memory cache per process: never the operator's own ticket cache.
        self._ccache = f"MEMORY:yarn-sidecar-{id(self)}"

    def credentials(self) -> Any:
        """Valid credentials, acquired from the keytab again when close to expiry."""
        import gssapi

        with self._lock:
            lifetime = None
            if self._creds is not None:
                try:
                    lifetime = self._creds.lifetime
                except gssapi.exceptions.ExpiredCredentialsError:
                    lifetime = 0
            if self._creds is None or (lifetime is not None and lifetime < RENEW_BEFORE_S):
                name = gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
                # kinit -kt into the private cache; krb5 gets a new TGT from the keytab.
                store: dict[bytes | str, bytes | str] = {
                    "client_keytab": str(self.keytab),
                    "ccache": self._ccache,
                }
                self._creds = gssapi.Credentials(name=name, usage="initiate", store=store)
            return self._creds

    def token(self, host: str) -> str:
        """A fresh ``Negotiate`` token for the RM at ``host``."""
        import base64

        import gssapi

        target = gssapi.Name(f"{self.service}@{host}", gssapi.NameType.hostbased_service)
        ctx = gssapi.SecurityContext(name=target, creds=self.credentials(), usage="initiate")
        out = ctx.step()
        return base64.b64encode(out or b"").decode("ascii")

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Negotiate {self.token(request.url.host)}"
        yield request


def rm_client_options(settings: Settings) -> dict[str, Any]:
    """``auth`` and ``verify`` keyword arguments of ``RMClient`` from the settings."""
    auth: httpx.Auth | None = None
    if settings.rm_auth == "kerberos" and settings.rm_keytab is not None:
        auth = KerberosAuth(settings.rm_principal, settings.rm_keytab)
    verify = rm_tls(settings.rm_ca_bundle, settings.rm_client_cert, settings.rm_client_key)
    return {"auth": auth, "verify": verify}
