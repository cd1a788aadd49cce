"""What a client author needs: the protocols a device backend implements, and the helpers it builds on.

A client is any object with ``device_id``, ``profile`` and ``sync`` (:class:`Client`); each
optional capability (a cache flush, peak measurement, a warm-up, a locator, a device model,
check buffers, a fork check) is a small protocol of its own, detected by ``isinstance``.
``tunekit.testing`` holds the conformance suite every client should pass::

    from tunekit.backend import Client, DevicePeaks, SupportsPeaks, warm_until_steady

Users of a backend need none of this: ``import tunekit as tk`` has what they use.
"""

from tunekit._base.code_identity import restriction_identity as function_identity
from tunekit._base.errors import CandidateFailed, ClientClosed, describe_error
from tunekit._candidates.arguments import unbindable
from tunekit._candidates.search_spec import check_enumerable, empty_space_error
from tunekit._candidates.space import Restriction
from tunekit._candidates.tunable_set import InputGenerator, KeyGenerator
from tunekit._measure.check import (
    CANARY_BYTES,
    CANARY_VALUE,
    CheckBuffers,
    HostCheckBuffers,
    ReferenceFailed,
    SupportsCheckBuffers,
)
from tunekit._measure.client import (
    Client,
    DevicePeaks,
    SupportsCacheFlush,
    SupportsColdInputs,
    SupportsDeviceModel,
    SupportsForkCheck,
    SupportsLocator,
    SupportsPeaks,
    SupportsWarmup,
)
from tunekit._measure.prepare import PreparesTogether
from tunekit._measure.run_policy import RunPolicy, current_run_policy
from tunekit._measure.steady import warm_until_steady

__all__ = [
    "CandidateFailed",
    "InputGenerator",
    "KeyGenerator",
    "PreparesTogether",
    "CANARY_BYTES",
    "CANARY_VALUE",
    "CheckBuffers",
    "Client",
    "ClientClosed",
    "DevicePeaks",
    "HostCheckBuffers",
    "ReferenceFailed",
    "Restriction",
    "RunPolicy",
    "SupportsCacheFlush",
    "SupportsCheckBuffers",
    "SupportsColdInputs",
    "SupportsDeviceModel",
    "SupportsForkCheck",
    "SupportsLocator",
    "SupportsPeaks",
    "SupportsWarmup",
    "check_enumerable",
    "current_run_policy",
    "describe_error",
    "empty_space_error",
    "unbindable",
    "function_identity",
    "warm_until_steady",
]
