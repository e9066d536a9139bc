# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a hostile (or merely careless) server writes back: the credential it was sent, in every form.

The cloud doubles' ``echo_auth`` faults answer with ``echo(value)`` as their error message, so a test can
check that a client scrubs the secret however a server chooses to quote it.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import quote, quote_plus


def echo(value):
    """``value`` raw, repr- and JSON-escaped, base64 (standard, URL-safe, unpadded) and URL-encoded."""
    data = value.encode("utf-8")
    return "refused credential %s; repr %r; json %s; b64 %s; b64url %s; b64 unpadded %s; url %s; url+ %s" % (
        value, value, json.dumps(value), base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode(),
        base64.b64encode(data).decode().rstrip("="), quote(value, safe=""), quote_plus(value))
