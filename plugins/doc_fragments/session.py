# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The options of every cloud API session: timeouts, retries, render mode (module_utils/_core/argspec.py SESSION_SPEC).

    The gcp fragment and azure's WITH_GCP include it; a module does not list it.
    """

    DOCUMENTATION = r"""
options:
  request_timeout:
    description:
      - Seconds to wait for one HTTP response.
    type: int
    default: 60
  operation_timeout:
    description:
      - Seconds to wait for one long-running operation to finish.
    type: int
    default: 3600
  max_retries:
    description:
      - How many times a request that failed with HTTP 429, a 5xx status or a connection reset is retried, with jittered
        exponential backoff honouring C(Retry-After).
    type: int
    default: 8
  render_dir:
    description:
      - Render mode. When set, no credentials are used and nothing is sent to the cloud.
      - The module plans against an empty project or subscription and writes each request it would send, in order, as a
        JSON file under C(<render_dir>/requests/).
    type: path
"""
