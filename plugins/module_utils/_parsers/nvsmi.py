# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Parsers for nvidia-smi output (text formats in the research notes, nvidia-stack.md 5.3).

One function per output, each returning plain lists/dicts:

- ``parse_list``          ``nvidia-smi -L`` (GPUs and their MIG devices, old and new UUID forms)
- ``parse_gi_profiles``   ``nvidia-smi mig -lgip``
- ``parse_gi_placements`` ``nvidia-smi mig -lgipp``
- ``parse_gi``            ``nvidia-smi mig -lgi``
- ``parse_ci``            ``nvidia-smi mig -lci`` (with or without the Placement column)
- ``parse_query_csv``     ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``
- ``parse_query_xml``     ``nvidia-smi -q -x`` (MIG mode and MIG devices)
- ``parse_mig_messages``  create/destroy/enable messages of ``nvidia-smi mig -cgi/-cci/-dgi/-dci`` and ``-mig``

Whitespace is not significant (tables are matched by columns, not by offsets; CRLF and tabs are
fine). Answers such as "No MIG-enabled devices found." or "No GPU instances found." give an empty
list; any other text that holds no recognisable row raises ``NvsmiError`` carrying nvidia-smi's
message (for example "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver").
``PARSERS`` maps a short name to each parser so test fixtures can name the parser they exercise.
"""

from __future__ import annotations

import csv
import io
import re
from xml.etree import ElementTree


class NvsmiError(ValueError):
    """nvidia-smi answered with an error, or with text that is not the expected output."""


_NOTHING_FOUND = re.compile(r"^\s*No\b.*\bfound\.?\s*\Z", re.IGNORECASE)
_NOT_AVAILABLE = ("n/a", "[n/a]", "[not supported]", "not supported", "[insufficient permissions]", "[unknown error]",
                  "[gpu is lost]", "")


def _lines(text):
    if text is None:
        return []
    if isinstance(text, (list, tuple)):  # stdout_lines
        text = "\n".join(text)
    return str(text).replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ").split("\n")


def _nothing_or_error(lines, what):
    """[] when nvidia-smi said there is nothing; NvsmiError with its message otherwise."""
    meaningful = [line.strip() for line in lines if line.strip() and not re.match(r"^[+|=\-\s]*\Z", line)]
    if not meaningful or any(_NOTHING_FOUND.match(line) for line in meaningful):
        return []
    raise NvsmiError("no %s in the nvidia-smi output: %s" % (what, " ".join(meaningful)[:300]))


def _matched_rows(text, pattern, row, what):
    """row(match) of every line ``pattern`` finds in a table of nvidia-smi; see _nothing_or_error when none."""
    lines = _lines(text)
    rows = [row(match) for match in (pattern.search(line.strip()) for line in lines) if match]
    return rows or _nothing_or_error(lines, what)


def _value(text):
    text = (text or "").strip()
    return None if text.lower() in _NOT_AVAILABLE else text


def _number(text):
    text = _value(text)
    if text is None:
        return None
    if re.match(r"^-?\d+\Z", text):
        return int(text)
    if re.match(r"^-?\d+\.\d+\Z", text):
        return float(text)
    return text


def _mig_name(name):
    return re.sub(r"^MIG\s+", "", name.strip())


# --------------------------------------------------------------------------------------------
# nvidia-smi -L
# --------------------------------------------------------------------------------------------

_LIST_TOKEN = re.compile(
    r"(?P<gpu>GPU\s+(?P<gpu_index>\d+):\s+(?P<gpu_name>[^\n]+?)\s+\(UUID:\s*(?P<gpu_uuid>GPU-[0-9A-Fa-f-]+)\))"
    r"|(?P<mig>MIG\s+(?P<profile>\S+)\s+Device\s+(?P<mig_index>\d+):\s+\(UUID:\s*(?P<mig_uuid>MIG-[^)\s]+)\))")
_OLD_MIG_UUID = re.compile(r"^MIG-(GPU-[0-9A-Fa-f-]+)/(\d+)/(\d+)\Z")


def parse_list(text):
    """GPUs of ``nvidia-smi -L``: [dict(index, name, uuid, mig_devices=[dict(profile, index, uuid)])].

    Old drivers print MIG UUIDs as ``MIG-GPU-<uuid>/<gi>/<ci>``; those devices also carry
    ``gpu_instance_id`` and ``compute_instance_id``. Text that lost its line breaks (a web page's
    copy) parses the same.
    """
    gpus = []
    raw = "\n".join(_lines(text))
    for match in _LIST_TOKEN.finditer(raw):
        if match.group("gpu"):
            gpus.append(dict(index=int(match.group("gpu_index")), name=match.group("gpu_name").strip(),
                             uuid=match.group("gpu_uuid"), mig_devices=[]))
            continue
        if not gpus:
            raise NvsmiError("MIG device listed before any GPU in nvidia-smi -L output")
        device = dict(profile=match.group("profile"), index=int(match.group("mig_index")), uuid=match.group("mig_uuid"))
        old = _OLD_MIG_UUID.match(device["uuid"])
        if old:
            device["gpu_instance_id"] = int(old.group(2))
            device["compute_instance_id"] = int(old.group(3))
        gpus[-1]["mig_devices"].append(device)
    if not gpus:
        return _nothing_or_error(_lines(text), "GPU")
    return gpus


def mig_devices(text):
    """Every MIG device of ``nvidia-smi -L`` output, each with its GPU's index and name."""
    devices = []
    for gpu in parse_list(text):
        for device in gpu["mig_devices"]:
            devices.append(dict(device, gpu=gpu["index"], gpu_name=gpu["name"]))
    return devices


def listing_problems(text, profile, count=1, exact=False):
    """Why an ``nvidia-smi -L`` listing does not show ``count`` MIG devices of ``profile``; [] when it does.

    Every MIG device listed must be of ``profile``; there must be at least ``count`` of them
    (exactly ``count`` with ``exact``).
    """
    try:
        gpus = parse_list(text)
    except NvsmiError as exc:
        return [str(exc)]
    devices = [d for gpu in gpus for d in gpu["mig_devices"]]
    problems = []
    if not gpus:
        problems.append("nvidia-smi -L listed no GPU")
    wrong = sorted({d["profile"] for d in devices if d["profile"] != profile})
    if wrong:
        problems.append("MIG devices of profile %s listed, expected only %s" % (", ".join(wrong), profile))
    have = len([d for d in devices if d["profile"] == profile])
    if (exact and have != count) or have < count:
        problems.append("%d MIG %s device(s) listed, expected %s%d" % (have, profile, "" if exact else "at least ", count))
    return problems


# --------------------------------------------------------------------------------------------
# nvidia-smi mig -lgip / -lgipp / -lgi / -lci
# --------------------------------------------------------------------------------------------

_LGIP_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?P<name>MIG\s+\S+)\s+(?P<id>\d+)\s+(?P<free>\d+)/(?P<total>\d+)\s+(?P<memory>[\d.]+|N/A)"
    r"\s+(?P<p2p>\S+)\s+(?P<sm>\d+|N/A)\s+(?P<dec>\d+|N/A)\s+(?P<enc>\d+|N/A)\s*\|\s*\Z")
_LGIP_ROW2 = re.compile(r"^\|\s+(?P<ce>\d+|N/A)\s+(?P<jpeg>\d+|N/A)\s+(?P<ofa>\d+|N/A)\s*\|\s*\Z")


def parse_gi_profiles(text):
    """GPU-instance profiles of ``nvidia-smi mig -lgip``.

    [dict(gpu, profile, profile_id, free, total, memory_gib, p2p, sm, dec, enc, ce, jpeg, ofa)]
    """
    rows = []
    lines = _lines(text)
    for number, line in enumerate(lines):
        match = _LGIP_ROW.match(line.strip())
        if not match:
            continue
        row = dict(gpu=int(match.group("gpu")), profile=_mig_name(match.group("name")), profile_id=int(match.group("id")),
                   free=int(match.group("free")), total=int(match.group("total")),
                   memory_gib=_number(match.group("memory")), p2p=match.group("p2p") == "Yes",
                   sm=_number(match.group("sm")), dec=_number(match.group("dec")), enc=_number(match.group("enc")),
                   ce=None, jpeg=None, ofa=None)
        following = lines[number + 1].strip() if number + 1 < len(lines) else ""
        second = _LGIP_ROW2.match(following)
        if second:
            row.update(ce=_number(second.group("ce")), jpeg=_number(second.group("jpeg")),
                       ofa=_number(second.group("ofa")))
        rows.append(row)
    return rows or _nothing_or_error(lines, "GPU instance profile")


_LGIPP_ROW = re.compile(
    r"GPU\s+(?P<gpu>\d+)\s+Profile\s+ID\s+(?P<id>\d+)\s+Placements?\s*:\s*\{(?P<starts>[\d,\s]*)\}\s*:\s*(?P<size>\d+)")


def parse_gi_placements(text):
    """Possible placements of ``nvidia-smi mig -lgipp``: [dict(gpu, profile_id, starts, size)]."""
    def row(match):
        starts = [int(s) for s in re.split(r"[,\s]+", match.group("starts").strip()) if s]
        return dict(gpu=int(match.group("gpu")), profile_id=int(match.group("id")), starts=starts,
                    size=int(match.group("size")))

    return _matched_rows(text, _LGIPP_ROW, row, "GPU instance placement")


_LGI_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?P<name>MIG\s+\S+)\s+(?P<profile_id>\d+)\s+(?P<instance_id>\d+)\s+(?P<start>\d+):(?P<size>\d+)"
    r"\s*\|\s*\Z")


def parse_gi(text):
    """GPU instances of ``nvidia-smi mig -lgi``: [dict(gpu, profile, profile_id, instance_id, start, size)]."""
    def row(match):
        return dict(gpu=int(match.group("gpu")), profile=_mig_name(match.group("name")),
                    profile_id=int(match.group("profile_id")), instance_id=int(match.group("instance_id")),
                    start=int(match.group("start")), size=int(match.group("size")))

    return _matched_rows(text, _LGI_ROW, row, "GPU instance")


_LCI_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<name>MIG\s+\S+)\s+(?P<profile_id>\d+)\s+(?P<instance_id>\d+)"
    r"(?:\s+(?P<start>\d+):(?P<size>\d+))?\s*\|\s*\Z")


def parse_ci(text):
    """Compute instances of ``nvidia-smi mig -lci``.

    [dict(gpu, gpu_instance_id, profile, profile_id, instance_id, start, size)]; start/size are
    None on drivers without the Placement column.
    """
    def row(match):
        return dict(gpu=int(match.group("gpu")), gpu_instance_id=int(match.group("gi")),
                    profile=_mig_name(match.group("name")), profile_id=int(match.group("profile_id")),
                    instance_id=int(match.group("instance_id")),
                    start=int(match.group("start")) if match.group("start") else None,
                    size=int(match.group("size")) if match.group("size") else None)

    return _matched_rows(text, _LCI_ROW, row, "compute instance")


# --------------------------------------------------------------------------------------------
# --query-gpu CSV
# --------------------------------------------------------------------------------------------


def _field_name(header):
    return re.sub(r"\s*\[[^\]]*\]\s*\Z", "", header.strip())


def parse_query_csv(text, fields=None):
    """Rows of ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``.

    ``fields`` (list or comma-separated string) names the columns; a header row, when present,
    is recognised and skipped (units in brackets are dropped), and gives the names when
    ``fields`` is omitted. Values are stripped strings; ``[N/A]``, ``[Not Supported]`` and the
    like become None. With ``nounits`` numbers stay text (callers convert what they need).
    """
    if isinstance(fields, str):
        fields = [f.strip() for f in fields.split(",") if f.strip()]
    lines = [line for line in _lines(text) if line.strip()]
    if not lines:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))
    header = [_field_name(cell) for cell in rows[0]]
    looks_like_header = all(re.match(r"^[a-z_]+(\.[a-z_0-9]+)*\Z", cell) for cell in header) and (
        fields is None or header == list(fields))
    if looks_like_header:
        fields = fields or header
        rows = rows[1:]
    if not fields:
        raise NvsmiError("no header row in the nvidia-smi CSV and no fields given")
    result = []
    for row in rows:
        if len(row) != len(fields):
            if len(row) == 1:
                return _nothing_or_error(lines, "CSV row")
            raise NvsmiError("CSV row has %d values for %d fields: %s" % (len(row), len(fields), ", ".join(row)))
        result.append({name: _value(cell) for name, cell in zip(fields, row)})
    return result


# --------------------------------------------------------------------------------------------
# -q -x
# --------------------------------------------------------------------------------------------


def _text(element, path):
    found = element.find(path)
    if found is None or found.text is None:
        return None
    return _value(found.text)


def parse_query_xml(text):
    """GPUs of ``nvidia-smi -q -x``: [dict(id, product_name, uuid, mig_mode=dict(current, pending), mig_devices)].

    Each MIG device: dict(index, gpu_instance_id, compute_instance_id, multiprocessor_count,
    copy_engine_count, encoder_count, decoder_count, ofa_count, jpg_count, memory_total_mib).
    """
    raw = "\n".join(_lines(text)).strip()
    if not raw.startswith("<"):
        return _nothing_or_error(_lines(text), "XML document")
    try:
        root = ElementTree.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", raw))
    except ElementTree.ParseError as exc:
        raise NvsmiError("nvidia-smi -q -x output is not XML: %s" % exc)
    gpus = []
    for gpu in root.iter("gpu"):
        devices = []
        for device in gpu.iter("mig_device"):
            shared = device.find("device_attributes/shared")
            item = dict(index=_number(_text(device, "index")),
                        gpu_instance_id=_number(_text(device, "gpu_instance_id")),
                        compute_instance_id=_number(_text(device, "compute_instance_id")))
            for key in ("multiprocessor_count", "copy_engine_count", "encoder_count", "decoder_count", "ofa_count",
                        "jpg_count"):
                item[key] = _number(_text(shared, key)) if shared is not None else None
            total = _text(device, "fb_memory_usage/total")
            item["memory_total_mib"] = _number(re.sub(r"\s*MiB\Z", "", total)) if total else None
            devices.append(item)
        gpus.append(dict(id=gpu.get("id"), product_name=_text(gpu, "product_name"), uuid=_text(gpu, "uuid"),
                         mig_mode=dict(current=_text(gpu, "mig_mode/current_mig"),
                                       pending=_text(gpu, "mig_mode/pending_mig")),
                         mig_devices=devices))
    return gpus


# --------------------------------------------------------------------------------------------
# create / destroy / mode messages
# --------------------------------------------------------------------------------------------

_BUS_ID = r"(?P<bus_id>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])"
_MESSAGES = (
    ("created_gi", re.compile(
        r"Successfully created GPU instance ID\s+(?P<gi>\d+) on GPU\s+(?P<gpu>\d+) using profile (?P<profile>MIG \S+)"
        r" \(ID\s+(?P<profile_id>\d+)\)")),
    ("created_ci", re.compile(
        r"Successfully created compute instance ID\s+(?P<ci>\d+) on GPU\s+(?P<gpu>\d+) GPU instance ID\s+(?P<gi>\d+)"
        r" using profile (?P<profile>MIG \S+) \(ID\s+(?P<profile_id>\d+)\)")),
    ("destroyed_ci", re.compile(
        r"Successfully destroyed compute instance ID\s+(?P<ci>\d+) from GPU\s+(?P<gpu>\d+) GPU instance ID\s+(?P<gi>\d+)")),
    ("destroyed_gi", re.compile(r"Successfully destroyed GPU instance ID\s+(?P<gi>\d+) from GPU\s+(?P<gpu>\d+)")),
    ("mig_enabled", re.compile(r"Enabled MIG Mode for GPU " + _BUS_ID)),
    ("mig_disabled", re.compile(r"Disabled MIG Mode for GPU " + _BUS_ID)),
    ("mig_pending", re.compile(r"MIG mode is in pending (?P<state>enable|disable) state for GPU " + _BUS_ID
                               + r"(?::\s*(?P<reason>.*))?\Z")),
    ("error", re.compile(r"^(?P<message>(?:Unable to|Failed to|Option .* is not recognized|Error:).*)\Z")),
)


def parse_mig_messages(text):
    """Events in the output of MIG changes: [dict(event, ...)] in output order.

    Events: created_gi / created_ci (gpu, gpu_instance_id, compute_instance_id, profile,
    profile_id), destroyed_gi / destroyed_ci, mig_enabled / mig_disabled (bus_id),
    mig_pending (bus_id, state, reason: a reboot or GPU reset is needed), error (message).
    """
    events = []
    for line in _lines(text):
        line = line.strip()
        for event, pattern in _MESSAGES:
            match = pattern.search(line)
            if not match:
                continue
            found = {k: v for k, v in match.groupdict().items() if v is not None}
            item = dict(event=event)
            for key, value in found.items():
                if key in ("gi", "ci", "gpu", "profile_id"):
                    item[{"gi": "gpu_instance_id", "ci": "compute_instance_id"}.get(key, key)] = int(value)
                elif key == "profile":
                    item[key] = _mig_name(value)
                else:
                    item[key] = value.strip()
            events.append(item)
            break
    return events


PARSERS = {
    "list": parse_list,
    "lgip": parse_gi_profiles,
    "lgipp": parse_gi_placements,
    "lgi": parse_gi,
    "lci": parse_ci,
    "csv": parse_query_csv,
    "xml": parse_query_xml,
    "messages": parse_mig_messages,
}
