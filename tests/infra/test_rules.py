from __future__ import annotations

import pytest

from infra.catalog import instance
from infra.errors import TargetError
from infra.rules import check_size, check_variant, neuron_families

GIB = 2**30


def test_neuron_families_come_from_the_catalog() -> None:
    assert neuron_families() == ["inf2", "trn1"]


@pytest.mark.parametrize("instance_type", ["ml.c5.2xlarge", "ml.c6i.2xlarge", "ml.c6i.4xlarge"])
def test_neuron_artifacts_are_rejected_on_cpu_instances(instance_type: str) -> None:
    with pytest.raises(TargetError, match=rf"'neuron' artifact .* runs only on inf2/trn1 .* not on {instance_type}"):
        check_variant("t", "neuron", instance(instance_type))
    check_variant("t", "fp32", instance(instance_type))
    check_variant("t", "int8", instance(instance_type))


@pytest.mark.parametrize("instance_type", ["ml.inf2.xlarge", "ml.inf2.48xlarge", "ml.trn1.2xlarge"])
@pytest.mark.parametrize("variant", ["fp32", "int8"])
def test_cpu_artifacts_are_rejected_on_neuron_instances(instance_type: str, variant: str) -> None:
    with pytest.raises(TargetError, match=rf"'{variant}' is a CPU artifact .* of {instance_type}"):
        check_variant("t", variant, instance(instance_type))
    check_variant("t", "neuron", instance(instance_type))


def test_models_must_fit_accelerator_memory_on_neuron_instances() -> None:
    check_size("t", 32 * GIB, instance("ml.inf2.xlarge"))
    with pytest.raises(TargetError, match=r"model \(33.0 GiB\) is larger than the 32 GiB accelerator memory"):
        check_size("t", 33 * GIB, instance("ml.inf2.xlarge"))
    # Six chips: 192 GiB of HBM, although the host has 384 GiB.
    with pytest.raises(TargetError, match=r"192 GiB accelerator memory of ml\.inf2\.24xlarge"):
        check_size("t", 200 * GIB, instance("ml.inf2.24xlarge"))


def test_models_must_fit_host_memory_on_cpu_instances() -> None:
    check_size("t", 15 * GIB, instance("ml.c5.2xlarge"))
    with pytest.raises(TargetError, match=r"larger than the 16 GiB memory of ml\.c5\.2xlarge"):
        check_size("t", 17 * GIB, instance("ml.c5.2xlarge"))
