"""The instance profile names Karpenter gives an EC2NodeClass's ``spec.role`` profile, pinned.

Source: aws/karpenter-provider-aws ``pkg/apis/v1/ec2nodeclass.go`` ``InstanceProfileName`` (v1.0.0 to
v1.5: ``fmt.Sprintf("%s_%d", clusterName, lo.Must(hashstructure.Hash(fmt.Sprintf("%s%s", region,
name), hashstructure.FormatV2, nil)))``); mitchellh/hashstructure v2 ``Hash`` defaults its hasher
to Go's ``hash/fnv`` ``New64()``, FNV-1 64 (multiply by the prime, then XOR each byte).
"""

from __future__ import annotations

from kubespot.aws.instance_profiles import legacy_profile_name, new_profile_name


def test_the_legacy_name_is_karpenters_fnv1_hash() -> None:
    """Review 15a #2: the golden value a Go program printed with ``fnv.New64`` (FNV-1a would give
    ``prod_10259783061840669040``), so a profile Karpenter v1.0-v1.5 made is the one adopted."""
    assert legacy_profile_name("prod", "us-east-1", "default") == "prod_15843455441266977890"


def test_a_new_name_hashes_the_salt_too() -> None:
    """v1.6+ ``InstanceProfileName`` puts a random UUID into the hashed string: the same hash over
    region + class + salt, so two salts give two names and no salt a fresh one each time."""
    assert new_profile_name("prod", "us-east-1", "def", salt="ault") == "prod_15843455441266977890"
    assert new_profile_name("prod", "us-east-1", "default", salt="a") != new_profile_name(
        "prod", "us-east-1", "default", salt="b"
    )
    fresh = {new_profile_name("prod", "us-east-1", "default") for _ in range(2)}
    assert len(fresh) == 2
