"""The client's address, as far as the deployment's proxies can be trusted (design §16.5).

`X-Forwarded-For` is whatever the client wrote, plus one entry per proxy on the way. Without proxy settings it is
ignored and the peer's address (`REMOTE_ADDR`) is the client's. `NUM_PROXIES=n` (n proxies, each appending the
address it saw): the n-th entry from the right, believed only when the peer is a private or loopback address (a
proxy in front of the site has one; a client reaching the site directly, past the proxy, does not and could
otherwise name any address it likes). `TRUSTED_PROXIES` (addresses or networks): the peer must be one of
them, and the rightmost entry not among them is the client's. API throttles and django-axes' login lockouts both
key on this, so neither a forged header nor a shared proxy address decides whom they slow down.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings


def client_ip(request) -> str:
    remote = request.META.get("REMOTE_ADDR", "") or ""
    forwarded = [entry.strip() for entry in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if entry.strip()]
    if not forwarded:
        return remote
    trusted = _trusted_networks(tuple(settings.TRUSTED_PROXIES))
    if trusted:
        if not _is_trusted(remote, trusted):
            return remote
        for address in reversed(forwarded):
            if not _is_trusted(address, trusted):
                return address
        return forwarded[0]
    if settings.NUM_PROXIES and _is_internal(remote):
        return forwarded[-min(settings.NUM_PROXIES, len(forwarded))]
    return remote


@lru_cache(maxsize=8)
def _trusted_networks(entries: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _is_trusted(address: str, networks) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(parsed in network for network in networks)


def _is_internal(address: str) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    return parsed.is_private or parsed.is_loopback


class ClientAddressIdent:
    """For DRF throttles keyed by address: DRF's own `get_ident` takes a client-written X-Forwarded-For at its
    word when `NUM_PROXIES` is unset; this keys on `client_ip`."""

    def get_ident(self, request):
        return client_ip(request)
