# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes' naming rules (plugins/plugin_utils/_k8s/names.py), called
directly (tests/unit/plugins/filter/test_k8s_names.py tests the filters that wrap them)."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import names


@pytest.mark.parametrize("rule, value", [
    ("dns1123_label", "gpu-operator"), ("dns1123_label", "a" * 63),
    ("dns1123_subdomain", "nvidia.com"), ("helm_release", "r" * 53),
    ("label_key", "nvidia.com/gpu.present"), ("label_value", ""), ("label_value", "NVIDIA-A100-SXM4-40GB"),
    ("image", "nvcr.io/nvidia/gpu-operator:v25.3.4"), ("image", "busybox"),
    ("image", "registry.local:5000/team/app@sha256:" + "a" * 64), ("path_segment", "site-render_1.0"),
])
def test_names_kubernetes_accepts(rule, value):
    assert names.check(rule, value) is None


@pytest.mark.parametrize("rule, value", [
    ("dns1123_label", "GPU"), ("dns1123_label", "a" * 64), ("dns1123_label", "-gpu"), ("dns1123_label", None),
    ("dns1123_subdomain", "nvidia..com"), ("helm_release", "r" * 54), ("label_key", "-bad"),
    ("label_value", "a b"), ("image", "NVCR.IO/Upper Case"), ("path_segment", "../etc"), ("path_segment", ".hidden"),
])
def test_names_kubernetes_refuses_say_why(rule, value):
    why = names.check(rule, value)
    assert isinstance(why, str) and why


def test_an_unknown_rule_is_an_error_listing_the_rules():
    with pytest.raises(ValueError, match="rule 'nope' is not one of .*dns1123_label"):
        names.check("nope", "x")


def test_problems_name_each_option_and_skip_optional_empty_values():
    found = names.problems([
        dict(option="namespace", rule="dns1123_label", value="GPU"),
        dict(option="release", rule="helm_release", value="gpu-operator"),
        dict(option="registry", rule="registry", value="", required=False),
        dict(option="labels", rule="labels", value={}, required=False),
    ])
    assert len(found) == 1 and found[0].startswith("namespace: ")


@pytest.mark.parametrize("checks", ["namespace", [dict(rule="dns1123_label", value="x")], [["option"]]])
def test_malformed_checks_are_refused(checks):
    with pytest.raises(ValueError):
        names.problems(checks)


def test_values_in_messages_are_ascii_and_cut():
    assert names.show("caf\u00e9\n") == "'caf\\xe9\\n'"
    assert len(names.show("x" * 500)) <= 80


@pytest.mark.parametrize("kind", ["SecretProviderClass", "SealedSecret", "ExternalSecret", "secretstore", "ConfigMap", None, 7])
def test_kinds_that_only_contain_the_word_are_not_secrets(kind):
    assert names.is_secret_kind(kind) is False


# ---- image fields of chart values (image references everywhere, raw chart values too)

@pytest.mark.parametrize("values", [
    {},
    {"driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": "570.86.15"}},
    {"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.17.0", "pullPolicy": "IfNotPresent"}},
    {"image": {"repository": "registry.local:5000/mirror/plugin", "tag": ""}},  # an empty tag: the chart's default
    {"operator": {"image": "gpu-operator", "version": 25}},  # a number is written as text
    {"sidecars": [{"image": "busybox@sha256:" + "a" * 64}], "helm": {"repository": "https://helm.ngc.nvidia.com/nvidia"}},
    {"config": {"version": "v1", "flags": {"migStrategy": "single"}}},  # a version beside no image field
], ids=["empty", "gpu-operator component", "image dict", "empty tag", "numeric version", "digest, chart URL", "config version"])
def test_chart_values_with_good_image_fields_pass(values):
    assert names.check("chart_values_images", values) is None


@pytest.mark.parametrize("values, found", [
    ({"driver": {"repository": "NVCR.io/Nvidia"}}, ["driver.repository: 'NVCR.io/Nvidia' is not an image reference"]),
    ({"image": {"repository": "plugin", "tag": "v1;id"}}, ["image.tag: 'v1;id' is not an image tag"]),
    ({"a": [{"b": {"image": "x y"}}]}, ["a[0].b.image: 'x y' is not an image reference"]),
    ({"driver": {"image": "driver", "version": "-1"}, "toolkit": {"repository": "nvcr.io/", "version": "." * 129}},
     ["driver.version: '-1' is not an image tag", "toolkit.repository: 'nvcr.io/' is not an image reference",
      "toolkit.version: '" + "." * 20]),
    ({"image": {"repository": "plugin", "tag": True}}, ["image.tag: must be a string, got bool"]),
    ({"image": {"repository": "plugin", "tag": "a" * 129}}, ["image.tag: '" + "a" * 20]),
], ids=["capitals", "tag with a semicolon", "inside a list", "every problem", "boolean tag", "tag of 129"])
def test_chart_values_name_each_bad_image_field_by_its_path(values, found):
    lines = names.image_field_problems(values, "")
    assert len(lines) == len(found) and all(line.startswith(start) for line, start in zip(lines, found)), lines
    assert all(" is not an image " in line or "must be a string" in line for line in lines), lines
    assert names.check("chart_values_images", values) == "; ".join(lines)
    assert names.image_field_problems(values, "values") == ["values." + line for line in lines]


def test_chart_values_must_be_a_dict_and_a_tag_has_at_most_128_characters():
    assert names.check("chart_values_images", ["image"]) == "chart values must be a dict, got list"
    assert names.check("chart_values_images", None) is None
    assert names.check("image_tag", "a" * 128) is None and names.check("image_tag", "_v1.0-rc1") is None
    assert names.check("image_tag", 12.5) is None and names.check("image_tag", "") == "must not be empty"


@pytest.mark.parametrize("value, why", [
    (0, None), (90, None), ("10", None), (" 5 ", None),
    (-1, "-1 is negative; retries, timeouts and delays are 0 or more"), ("-5", "-5 is negative"),
    (True, "True is not a whole number"), (1.5, "1.5 is not a whole number"), ("ten", "'ten' is not a whole number"),
    (None, "None is not a whole number"),
], ids=["zero", "ninety", "text", "blanks", "minus one", "negative text", "boolean", "fraction", "word", "none"])
def test_counts_are_whole_numbers_of_zero_or_more(value, why):
    found = names.check("count", value)
    assert found == why if why is None else found.startswith(why), found


@pytest.mark.parametrize("value, why", [
    (1, None), ("12", None), (" 3 ", None), (0, "0 is less than 1; it must be a whole number of 1 or more"),
    (-4, "-4 is less than 1"), ("0", "0 is less than 1"), (True, "True is not a whole number"), (2.5, "2.5 is not a whole number"),
    ("five", "'five' is not a whole number"), (None, "None is not a whole number")])
def test_positive_is_a_whole_number_of_one_or_more(value, why):
    found = names.check("positive", value)
    assert found == why if why is None else found.startswith(why), found


@pytest.mark.parametrize("value, why", [
    (0, None), (0.0, None), ("0.25", None), (0.999, None),
    (1, "1 is outside [0, 1): a fraction of 0 or more and less than 1 (0.1 is 10 percent)"), (1.5, "1.5 is outside [0, 1)"),
    (-0.1, "-0.1 is outside [0, 1)"), ("-0.5", "-0.5 is outside [0, 1)"), ("ten", "'ten' is not a number"),
    (True, "True is not a number"), (float("nan"), "nan is not a number"), (None, "None is not a number")])
def test_tolerance_is_a_fraction_of_zero_or_more_below_one(value, why):
    found = names.check("tolerance", value)
    assert found == why if why is None else found.startswith(why), found


@pytest.mark.parametrize("value", ["8", 8, "1M", "1m", "8G", "8g", "512K", "1k", "1.5G", " 64 M ", "1MB", "1 MiB", "0", "1e3"])
def test_nccl_sizes_nccl_tests_reads(value):
    assert names.check("nccl_size", value) is None


@pytest.mark.parametrize("value", ["1T", "M", "", "-1", -1, "1 MBytes", "8G;reboot", "8G 16G", True, 1.5, None])
def test_nccl_sizes_nccl_tests_refuses(value):
    assert names.check("nccl_size", value).endswith(("is not a message size nccl-tests reads: a number of bytes, optionally "
                                                     "followed by K, M or G (8, 1M, 8G)", "is not a message size"))


@pytest.mark.parametrize("pair, why", [
    (["1M", "8G"], None), (["8", "8"], None), (["1024", "1K"], None), (["1k", "1024"], None), (["1.5M", "2M"], None),
    # a size that is not one is the single-size rule's to report
    (["x", "1M"], None),
    (["8G", "1M"], "the smallest size '8G' is larger than the largest '1M'; nccl-tests refuses the range"),
    (["1025", "1K"], "the smallest size '1025' is larger than the largest '1K'"), (["2g", "2047M"], "the smallest size '2g'"),
    (["1M"], "['1M'] is not a [min, max] pair"), ("1M", "'1M' is not a [min, max] pair")])
def test_nccl_size_ranges_run_from_the_smallest_to_the_largest(pair, why):
    found = names.check("nccl_size_range", pair)
    assert found == why if why is None else found.startswith(why), found


def test_readable_file_is_a_file_of_the_controller_that_can_be_read(tmp_path, monkeypatch):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GPU_OPS_TEST_DIR", str(tmp_path))
    assert names.check("readable_file", str(kubeconfig)) is None
    # ~ and environment variables are expanded, as Ansible expands an option of type path
    assert names.check("readable_file", "~/kubeconfig") is None
    assert names.check("readable_file", "$GPU_OPS_TEST_DIR/kubeconfig") is None
    assert names.check("readable_file", str(tmp_path / "missing")) == "%s does not exist on the controller" % ascii(
        str(tmp_path / "missing"))
    deep = str(tmp_path / ("d" * 100) / "kubeconfig")
    assert names.check("readable_file", deep) == "%s does not exist on the controller" % ascii(deep)
    assert names.check("readable_file", "~/missing") == "'~/missing' does not exist on the controller"
    assert names.check("readable_file", str(tmp_path)) == "%s is not a file" % ascii(str(tmp_path))
    assert names.check("readable_file", "") == "must not be empty"
    assert names.check("readable_file", {"clusters": []}) == "must be a string, got dict"


def test_readable_file_refuses_a_file_it_cannot_read(tmp_path, monkeypatch):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\n", encoding="utf-8")
    # the permission bits do not bind root: ask os.access as an unprivileged user would be answered
    monkeypatch.setattr(names.os, "access", lambda path, mode: not (path == str(kubeconfig) and mode == names.os.R_OK))
    assert names.check("readable_file", str(kubeconfig)) == "%s cannot be read (its permissions)" % ascii(str(kubeconfig))
    assert names.check("readable_file", str(tmp_path / "other")) == "%s does not exist on the controller" % ascii(
        str(tmp_path / "other"))
