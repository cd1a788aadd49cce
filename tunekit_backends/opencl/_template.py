"""KernelTemplate: one OpenCL source and a parameter space -> one Tunable per configuration."""

from __future__ import annotations

import contextlib
import hashlib
import math
import numbers
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic

import numpy as np
from typing_extensions import TypeVar

import tunekit as tk
from tunekit import Config, ParamValue, ParamValues, Space, Tunable, TunableSet, TuneGroup
from tunekit.backend import (
    InputGenerator,
    KeyGenerator,
    Restriction,
    check_enumerable,
    current_run_policy,
    empty_space_error,
    function_identity,
    unbindable,
)
from tunekit_backends.opencl._buffers import DeviceCheckBuffers, argument_hint, kernel_arg, overrun_message
from tunekit_backends.opencl._cl import CompileError, build_log, first_error_line, pyopencl
from tunekit_backends.opencl._client import OpenCLClient
from tunekit_backends.opencl._kernel_args import (
    argument_mismatch,
    declared_dtypes,
    kernel_params,
    kernels_in,
    source_aliases,
)
from tunekit_backends.opencl._together import FirstRun, compile_together

__all__ = ["Geometry", "KernelTemplate"]

# Defaults to Any: a template whose geometry and applies are lambdas names no key type, and needs no annotation.
K = TypeVar("K", default=Any)

Geometry = Callable[[Config, K], tuple[Sequence[int], Sequence[int] | None]]
"""(configuration, key) -> (global size, local size or None): the launch shape of a variant."""

Shape = tuple[tuple[int, ...], tuple[int, ...] | None]

_CHECKED_KEYS = 64
"""Keys a variant remembers as checked; the oldest is forgotten (checked again when it comes back)."""
_NO_DTYPE = object()

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_DEFINE_OPTION = re.compile(r"-D\s*([A-Za-z_][A-Za-z0-9_]*)")


def _check_defines(space: Space, options: Sequence[str]) -> None:
    """Refuse what a ``-D`` option cannot carry, or what would make every variant the same kernel."""
    for name, values in space.domains.items():
        for value in values:
            # An empty value (-DQUAL= defines QUAL as nothing) and a char literal ('a') build fine.
            if isinstance(value, str) and any(c.isspace() or c == '"' for c in value):
                raise ValueError(
                    f"KernelTemplate: parameter {name} has the value {value!r}, which -D{name}=... cannot carry (the "
                    "driver splits build options at spaces and drops double quotes); give one token, e.g. a typedef "
                    "name such as uint for unsigned int"
                )
    defined = set(_DEFINE_OPTION.findall(" ".join(options)))
    clash = sorted(defined & set(space.names))
    if clash:
        raise ValueError(
            f"KernelTemplate: options={list(options)} defines {', '.join(clash)}, a parameter of the space: each "
            "variant's -D would be overridden and every variant compile alike; drop it from options"
        )


def _looks_like_a_file_name(source: str) -> bool:
    """One line ending in a C or OpenCL file extension, or naming a file that exists."""
    text = source.strip()
    if "\n" in text or len(text) > 4096:
        return False
    return text.endswith((".cl", ".c", ".h", ".cu", ".clh", ".ocl")) or os.path.isfile(text)


def _define_value(value: ParamValue) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return f"{value!r}f"
    return str(value)


class KernelTemplate(Generic[K]):
    """An OpenCL kernel source whose ``-D`` parameters span a search space.

    ``space`` is a :class:`tunekit.Space` or a dict name -> values (with ``restrict=``, a
    predicate over a configuration). Each configuration becomes a candidate named
    ``kernel[NAME=value,...]``, compiled with ``-D NAME=value``; ``geometry(config, key)``
    gives its launch shape. ``applies(config, key)`` drops variants that cannot handle a
    key (say, a vector width that does not divide the row length) for that key only.

    Generic in the key type ``K``, taken from ``geometry``'s (or ``applies``') annotated key
    parameter: a ``KernelTemplate[MatKey]`` makes ``TunableSet[MatKey, Any]`` sets, and a type
    checker refuses a key generator of another key class, or the template where another key's
    is expected. With lambdas only, ``K`` is ``Any`` unless the variable is annotated.
    """

    def __init__(
        self,
        source: str,
        kernel_name: str,
        space: Space | Mapping[str, ParamValues],
        *,
        geometry: Geometry[K],
        restrict: Restriction | Sequence[Restriction] | None = None,
        options: Sequence[str] = (),
        applies: Callable[[Config, K], bool] | None = None,
    ) -> None:
        if not isinstance(source, str) or not source.strip():
            raise ValueError("KernelTemplate needs the kernel's OpenCL C source as a non-empty str")
        found = kernels_in(source)
        if not found and _looks_like_a_file_name(source):
            # Kernel Tuner reads a file name given as its kernel_source; here it would be compiled as C.
            raise ValueError(
                f"KernelTemplate takes the kernel's source text, and {source.strip()!r} is a file name: pass its "
                f"text, e.g. pathlib.Path({source.strip()!r}).read_text()"
            )
        if kernel_name not in found:
            raise ValueError(
                f"KernelTemplate: the source defines no '__kernel void {kernel_name}(...)'; "
                + (f"its kernels: {', '.join(found)}" if found else "it defines no kernel outside comments")
            )
        if not isinstance(space, Space | Mapping):  # a list would be read as names: "expected string", naming nothing
            raise TypeError(
                f"KernelTemplate(space=...) takes a tk.Space or a dict name -> values, got {type(space).__name__}; "
                'e.g. {"BLOCK": [64, 128, 256], "VEC": [1, 2, 4]}'
            )
        # Names are checked before tk.Space checks them, so the error says why C needs them so.
        for name in space.names if isinstance(space, Space) else space:
            if not _IDENTIFIER.fullmatch(name):
                raise ValueError(f"KernelTemplate: parameter {name!r} is not a C identifier, so it cannot be -D{name}")
        if isinstance(space, Space):
            if restrict is not None:
                raise ValueError("KernelTemplate: give restrict= to tk.Space(...), not alongside a Space")
            self.space = space
        else:
            self.space = Space(restrict=restrict, **dict(space))
        # Here rather than at tunable_set(): a template's set, which every use of it goes through, lists
        # every configuration.
        check_enumerable(
            f"KernelTemplate({kernel_name!r})",
            self.space,
            "narrow the template's parameter values (a restriction does not shorten the walk)",
        )
        # Kept as a tuple at once: a generator would be used up by the checks below.
        options = options if isinstance(options, str) else tuple(options)
        if isinstance(options, str) or not all(isinstance(o, str) for o in options):
            # a str would be iterated into one option per character: "-", "c", "l", ...
            raise TypeError(
                f"KernelTemplate(options=...) takes a list of str, one per compiler option, got {options!r}; "
                'e.g. options=["-cl-fast-relaxed-math"]'
            )
        _check_defines(self.space, options)
        if not callable(geometry):
            raise TypeError("KernelTemplate(geometry=...) takes a callable (config, key) -> (global, local)")
        _check_config_and_key(kernel_name, "geometry", geometry, "geometry=lambda c, key: ((key.n,), (c.BLOCK,))")
        if applies is not None:
            _check_config_and_key(kernel_name, "applies", applies, "applies=lambda c, key: key.n % c.BLOCK == 0")
        self.source = source
        self.kernel_name = kernel_name
        self.geometry = geometry
        self.options = tuple(options)
        self.applies = applies
        self.params = kernel_params(source, kernel_name)
        """The kernel's parameters as the source declares them; None when it cannot be read safely (not checked)."""
        for param in self.params or ():
            if param.name in self.space.names:
                # -Dn=64 rewrites the parameter's own name: the build fails as "expected ')'" at the command line.
                raise ValueError(
                    f"KernelTemplate {kernel_name!r}: the space's parameter {param.name!r} is also the name of the "
                    f"kernel's parameter `{param.declaration()}`, which its -D{param.name}=... would replace in the "
                    "source, so no variant would build; rename the tuning parameter (e.g. upper case, "
                    f"{param.name.upper()!r} if the source does not use that name)"
                )
        self._aliases = source_aliases(source, self.options)
        self._built: set[str] = set()
        self._built_lock = threading.Lock()
        digest = hashlib.sha256()
        for part in (source, kernel_name, *self.options, self.space.hash):
            digest.update(part.encode() + b"\x00")
        self.source_hash = digest.hexdigest()[:32]
        # The launch shape decides what a variant measures as much as its source: a winner tuned under
        # another geometry (a grid divisor fixed since) or applies (which variants a key may run) is stale.
        launch = hashlib.sha256()
        for fn in (geometry, applies):
            launch.update(("-" if fn is None else function_identity(fn)).encode() + b"\x00")
        self.launch_hash = launch.hexdigest()[:32]

    @property
    def configs(self) -> list[Config]:
        """Every valid configuration, in space order."""
        return list(self.space)

    def name_of(self, config: Config) -> str:
        """The canonical candidate name, e.g. ``vec_add[BLOCK=256,VEC=4]``."""
        return f"{self.kernel_name}[{config.name}]"

    def build_options(self, config: Config) -> list[str]:
        """Compiler options of ``config``: one ``-D`` per parameter, then the template's options."""
        return [f"-D{name}={_define_value(value)}" for name, value in config.items()] + list(self.options)

    def define_value(self, value: ParamValue) -> str:
        """How a parameter value is spelled in C (``-DNAME=<this>``, or ``#define NAME <this>``)."""
        return _define_value(value)

    def argument_dtypes(self, config: Config) -> tuple[Any, ...] | None:
        """Each parameter's element dtype in ``config``'s variant (None where not checked); None: no check."""
        if self.params is None:
            return None
        defines = {name: _define_value(value) for name, value in config.items()}
        return declared_dtypes(self.params, self._aliases, defines)

    def compiled(self) -> list[str]:
        """Names of the variants built in this process so far (any client)."""
        with self._built_lock:
            return sorted(self._built)

    def _mark_built(self, name: str) -> None:
        with self._built_lock:
            self._built.add(name)

    def tunables(self, client: OpenCLClient, key: KeyGenerator[K]) -> list[Tunable[Any, K]]:
        """One tunable per configuration, compiled lazily for ``client`` (or in the prepare phase)."""
        group = TuneGroup(f"{self.kernel_name}:applies", lambda k: 0) if self.applies is not None else None
        out = []
        for config in self.space:
            variant = _Variant(self, client, config, key)
            tunable: Tunable[Any, K] = Tunable(
                self.name_of(config), variant, version=self.source_hash, prepare=_PrepareHook(variant)
            )
            if group is not None:
                tunable = tunable.group(group, _Applies(self, config))
            out.append(tunable)
        if not out:  # an empty set would fail only at its first execute, saying to add tunables with with_tunable
            raise empty_space_error(f"KernelTemplate {self.kernel_name!r}", self.space)
        return out

    def tunable_set(
        self,
        client: OpenCLClient,
        *,
        key: KeyGenerator[K],
        inputs: InputGenerator[K] | None = None,
        reference: Callable[..., Any] | None = None,
        outputs: Sequence[int] | None = None,
        rtol: float = 0.0,
        atol: float = 0.0,
        compare: Callable[[Any, Any], bool] | None = None,
    ) -> TunableSet[K, Any]:
        """The set of every variant; with ``outputs`` (the positions the kernel writes), each is checked.

        The checksum includes the hash of the source, options and space, and the code of
        ``geometry`` and ``applies`` (with the plain data they read): editing the kernel or its
        launch shape re-tunes. Without ``reference``, variants are compared with the first one that runs.
        Without ``inputs``, variants are timed on device copies of the caller's arguments (a
        pyopencl array cannot be deep-copied, as other sets' inputs are). ``compare``: a custom check of
        each output, ``(expected, got) -> bool`` (see ``TunableSet.with_reference``).
        """
        if reference is not None and outputs is None:
            # A variant returns its launch's event: compared with the reference's arrays, every one would fail
            # with "output 0: shape () differs from the expected (n,)", blaming the kernels.
            raise ValueError(
                f"KernelTemplate {self.kernel_name!r}: tunable_set(reference=...) needs outputs=[...], the positions "
                "of the arguments the kernel writes (e.g. outputs=[1] for y in scale(x, y, n)): a variant returns "
                "its launch's event, so the check compares those arguments with what the reference returns"
            )
        tunables: TunableSet[K, Any] = (
            TunableSet(key=key, inputs=inputs if inputs is not None else _DeviceCopies(client))
            .with_tunables(self.tunables(client, key))
            .with_extra("checksum:source", self.source_hash)
            .with_extra("checksum:launch", self.launch_hash)
            .with_extra("space", self.space)
            .with_extra("space_name_of", self.name_of)
        )
        if reference is not None or outputs is not None or compare is not None:
            tunables = tunables.with_reference(reference, outputs=outputs, rtol=rtol, atol=atol, compare=compare)
        return tunables

    def __repr__(self) -> str:
        return f"KernelTemplate({self.kernel_name!r}, {self.space!r})"


def _sizes(values: Any) -> tuple[int, ...]:
    sizes = tuple(values)
    if not all(isinstance(v, numbers.Integral) or (isinstance(v, float) and v.is_integer()) for v in sizes):
        raise TypeError
    return tuple(int(v) for v in sizes)


def _launch_shape(name: str, shape: Any) -> Shape:
    """The geometry's (global, local) as int tuples, or an error saying what is wrong with it.

    Each mistake here would reach the driver as something else: "zip() argument 2 is shorter than
    argument 1", "'int' object is not iterable", or a zero-sized launch whose untouched output
    only the check notices; a size of 1000.5 would be truncated.
    """
    try:
        global_size, local_size = shape
        launch = _sizes(global_size), None if local_size is None else _sizes(local_size)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name}: geometry(config, key) must return (global sizes, local sizes or None), each a tuple of whole "
            f"numbers, e.g. ((n,), (64,)); it returned {shape!r}"
        ) from None
    dims, local = len(launch[0]), launch[1]
    if not 1 <= dims <= 3 or (local is not None and len(local) != dims):
        raise ValueError(
            f"{name}: geometry(config, key) returned global size {launch[0]} and local size {local}: give 1 to 3 "
            "dimensions, the same number in both"
        )
    if min(launch[0]) < 1 or (local is not None and min(local) < 1):
        raise ValueError(
            f"{name}: geometry(config, key) returned global size {launch[0]} and local size {local}: every size "
            "must be at least 1 (a zero-sized launch runs nothing and leaves the output as it was)"
        )
    return launch


def _check_config_and_key(kernel_name: str, what: str, fn: Callable[..., Any], example: str) -> None:
    """Refuse, where the template is made, a geometry or applies that cannot be called as ``fn(config, key)``.

    Otherwise every variant fails alike at its first compile, with "<lambda>() takes 1 positional argument
    but 2 were given" and nothing naming which function of the template it was.
    """
    if refused := unbindable(fn, 2):
        _, why = refused
        raise TypeError(
            f"KernelTemplate {kernel_name!r}: {what}= cannot be called as {what}(config, key) ({why}); it is given "
            f"the variant's configuration and the key, e.g. {example}"
        )


class _Applies(Generic[K]):
    """A variant's priority from the template's ``applies``: 0 when it can handle a key, -1 (skipped) otherwise."""

    def __init__(self, template: KernelTemplate[K], config: Config) -> None:
        self.template = template
        self.config = config

    def __call__(self, key: K) -> int:
        applies = self.template.applies
        if applies is None:
            return 0
        verdict = applies(self.config, key)
        if not isinstance(verdict, bool | np.bool_):
            # Taken for its truth, `key.n % c.BLOCK` (meant `== 0`) skips exactly the variants that apply, and
            # a branch without `return` (None) skips silently; both were reported as "applies= returned False".
            raise TypeError(
                f"KernelTemplate {self.template.kernel_name!r}: applies= returned {type(verdict).__name__} "
                f"{verdict!r:.60} for {self.template.name_of(self.config)} and key {key!r}; it must return a bool "
                "(True: the variant can run this key): compare explicitly, e.g. `key.n % (c.BLOCK * c.VEC) == 0`, "
                "and return on every path"
            )
        return 0 if verdict else -1

    def why_skipped(self, key: object) -> str:
        """Said in the tune's record and errors instead of "negative priority"."""
        return "does not apply to this key (the KernelTemplate's applies= returned False for this variant)"


class _DeviceCopies:
    """The default inputs generator of a template's set: fresh device copies of the caller's arguments."""

    copies_callers_arguments = True
    """A variant refusing these copies refuses the caller's arguments: the tuner does not remember that for the key."""

    def __init__(self, client: OpenCLClient) -> None:
        self.client = client

    def __call__(self, key: object, *caller: Any) -> tuple[Any, ...]:
        return self.client.check_buffers(caller, ()).args


class _Variant(Generic[K]):
    """One configuration bound to one client: builds once, launches on the client's queue."""

    def __init__(self, template: KernelTemplate[K], client: OpenCLClient, config: Config, key: KeyGenerator[K]) -> None:
        self.template = template
        self.client = client
        self.config = config
        self.key = key
        self.name = template.name_of(config)
        self._lock = threading.Lock()
        self._kernel: Any = None
        self.failure: str | None = None
        """Why this variant does not build (found while compiling it with others); its hook raises it."""
        self._launched: dict[Shape, tuple[str, bool] | None] = {}
        """Launch shapes this variant was first launched at (in a worker or here): None, or the error and
        whether it must never launch here again at that shape (it took its worker down, then this process
        must not even build it, or wrote past the end of a buffer)."""
        self._offered: set[Shape] = set()
        """Launch shapes a compile of this variant together with others was tried at."""
        self.first_run: FirstRun | None = None
        """The output positions a tune's check wants from this variant's first launch in a compile worker on
        which inputs, and where to report them (see ``_together.py``); None: it wants none."""
        self._dtypes = template.argument_dtypes(config)
        self._checked: dict[object, tuple[Shape, tuple[object, ...]]] = {}
        """Keys this variant was called at, their launch shape and the arguments' dtypes last checked: the
        geometry is checked at the first launch of each key, the dtypes again only when they differ from
        these (a tuple compare, cheap next to validating the geometry: benches/launch.py)."""

    def unbuilt(self) -> bool:
        """Neither built nor known not to build."""
        return self._kernel is None and self.failure is None

    def needs_first_launch(self, inputs: tuple[Any, ...]) -> bool:
        """Buildable, and not yet launched at the shape ``inputs`` give (PoCL compiles per local size)."""
        if self.failure is not None:
            return False
        try:
            return self.shape(inputs) not in self._launched
        except Exception:  # its own hook reports the geometry error
            return False

    def offered(self, inputs: tuple[Any, ...]) -> None:
        """Compiling together has tried this variant for ``inputs``: its own hook need not try again."""
        with contextlib.suppress(Exception):  # its own hook reports a geometry error
            self._offered.add(self.shape(inputs))

    def fail(self, reason: str) -> None:
        """Record why this variant does not build."""
        self.failure = reason

    def worker_launched(self, inputs: tuple[Any, ...], error: str | None, *, fatal: bool = False) -> None:
        """A compile worker built this variant and first-launched it on ``inputs``: fine, or ``error``.

        ``fatal``: the variant crashed or hung its worker, so this process never builds or runs it.
        """
        self._launched[self.shape(inputs)] = None if error is None else (error, fatal)

    def adopt(self, kernel: Any) -> None:
        """Take ``kernel``, built for this variant inside a program shared with other variants."""
        with self._lock:
            if self._kernel is None:
                self._kernel = kernel
                self.template._mark_built(self.name)

    def kernel(self) -> Any:
        """The built kernel; the first call compiles (thread-safe)."""
        kernel = self._kernel
        if kernel is not None:
            return kernel
        cl = pyopencl()
        with self._lock:
            if self._kernel is None:
                options = self.template.build_options(self.config)
                try:
                    program = cl.Program(self.client.context, self.template.source).build(options=options)
                except cl.Error as exc:
                    raise CompileError(
                        f"{self.name}: build failed: {first_error_line(build_log(exc))}\n{exc}"
                    ) from None
                self._kernel = cl.Kernel(program, self.template.kernel_name)
                self.template._mark_built(self.name)
            return self._kernel

    def shape(self, args: tuple[Any, ...]) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
        """The launch's global and local sizes for these arguments."""
        return _launch_shape(self.name, self.template.geometry(self.config, self.key(*args)))

    def check_arguments(self, args: tuple[Any, ...]) -> None:
        """Raise TypeError when an array's dtype is not what its parameter declares (a wrong result otherwise)."""
        params = self.template.params
        if params is not None and self._dtypes is not None:
            mismatch = argument_mismatch(self.name, params, self._dtypes, args)
            if mismatch is not None:
                raise tk.InputTypeError(mismatch)

    def _checked_shape(self, args: tuple[Any, ...]) -> Shape:
        """The launch shape for ``args``: the geometry checked once per key, the dtypes whenever they change."""
        key = self.key(*args)
        # Checking the dtypes once per key would let a later call at that key launch on another dtype's bytes.
        # A Buffer or a Python int has none: a sentinel, as numpy takes `dtype == None` for float64.
        # The type too: a host numpy float64 array (not checked, refused by the launch) must not vouch
        # for a pyopencl float64 array at the same key.
        dtypes = tuple([(type(a), getattr(a, "dtype", _NO_DTYPE)) for a in args])  # a list: faster than a generator
        checked = self._checked.get(key)
        if checked is not None and checked[1] == dtypes:
            return checked[0]
        shape = (
            checked[0] if checked is not None else _launch_shape(self.name, self.template.geometry(self.config, key))
        )
        self.check_arguments(args)
        with self._lock:
            if key not in self._checked and len(self._checked) >= _CHECKED_KEYS:
                del self._checked[next(iter(self._checked))]
            self._checked[key] = (shape, dtypes)
        return shape

    def __call__(self, *args: Any) -> Any:
        # Checked before building: a cached winner called with the wrong dtype would compile itself first.
        global_size, local_size = self._checked_shape(args)
        kernel = self._kernel if self._kernel is not None else self.kernel()
        launch_args = [kernel_arg(a) for a in args]
        try:
            with self._lock:  # clSetKernelArg on one kernel object is not thread-safe
                return kernel(self.client.queue, global_size, local_size, *launch_args)
        except Exception as exc:
            refused = _refused_arguments(kernel, args, exc)
            if refused is None:
                raise
            # The caller's error, as prepare() names it during a tune: a cached winner raising the driver's
            # bare "INVALID_VALUE - when processing arg#4" would also have every next-ranked variant tried.
            raise tk.InputTypeError(f"{self.name}: {refused}") from exc

    def prepare(self, *args: Any) -> None:
        """Build, check the launch against the device's limits, and launch once on scratch copies.

        The launch is part of compiling: PoCL, for one, compiles the work-group function at
        the first launch with a given local size. It happens in a compile worker when the client
        has them, and never in this process when the tune isolates its candidates: the isolated
        worker's first run (check or warm-up) is then the first launch, under the time limit.
        """
        cl = pyopencl()
        global_size, local_size = self.shape(args)
        self.check_arguments(args)  # before a compile worker first-launches it on these arrays
        device = self.client.device
        shape = (global_size, local_size)
        if self.client.compile_pool is not None and shape not in self._offered and self.needs_first_launch(args):
            compile_together([self], args)  # a hook called on its own still compiles in a worker
        if self.failure is not None:
            raise CompileError(f"{self.name}: {self.failure}")
        worker_error = self._launched.get(shape)
        if worker_error is not None and worker_error[1]:
            raise CompileError(f"{self.name}: {worker_error[0]}")
        kernel = self.kernel()
        if kernel.num_args != len(args):  # pyopencl's own error names neither count ("'int32' is not iterable")
            raise CompileError(
                f"{self.name}: the kernel takes {kernel.num_args} arguments and was given {len(args)}; make the "
                "inputs (the inputs= generator's tuple, else execute's) match the kernel's parameters"
            )
        if local_size is not None:
            limit = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
            if math.prod(local_size) > limit:
                raise CompileError(
                    f"{self.name}: refused by the device: local size {local_size} has {math.prod(local_size)} "
                    f"work-items, this kernel allows at most {limit} on {device.name}"
                )
            if any(g % max(x, 1) for g, x in zip(global_size, local_size, strict=True)):
                rounded = tuple(-(-g // max(x, 1)) * x for g, x in zip(global_size, local_size, strict=True))
                raise CompileError(
                    f"{self.name}: global size {global_size} is not a multiple of local size {local_size} (a "
                    f"launch runs whole work-groups); round it up in the template's geometry, to {rounded} here "
                    "(Kernel Tuner rounds its grid up so itself), with a bounds check in the kernel, or skip such "
                    "variants for the key with applies="
                )
        local_mem = kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, device)
        if local_mem > device.local_mem_size:
            raise CompileError(
                f"{self.name}: refused by the device: needs {local_mem} bytes of local memory, "
                f"{device.name} has {device.local_mem_size}"
            )
        if worker_error is not None:  # after the checks above, whose messages say more
            raise CompileError(
                f"{self.name}: refused by the device at launch in a compile worker: {_with_hint(worker_error[0], args)}"
            )
        if shape in self._launched:
            return  # a worker launched it at this shape: the driver's cache holds its work-group code
        if current_run_policy().isolated:
            # Its first run is left to the isolated worker, under the time limit: here a kernel that never ends
            # could not be stopped (a wait on the device cannot be interrupted) and would hang the caller.
            return
        positions = [i for i, a in enumerate(args) if isinstance(a, cl.array.Array | cl.Buffer)]
        scratch = DeviceCheckBuffers(self.client, args, positions)
        try:
            with self._lock:
                event = kernel(self.client.queue, global_size, local_size, *[kernel_arg(a) for a in scratch.args])
            event.wait()
        except cl.Error as exc:
            raise CompileError(
                f"{self.name}: refused by the device at launch: {_with_hint(first_error_line(str(exc)), args)}"
            ) from None
        damaged = scratch.damaged()
        if damaged:  # as a compile worker says it; without a reference nothing else would have
            message = overrun_message(damaged[0], scratch.size(damaged[0]))
            self._launched[shape] = (message, True)  # as from a worker: never launched here again at this shape
            raise CompileError(f"{self.name}: {message}")
        self._launched[shape] = None


def _refused_arguments(kernel: Any, args: tuple[Any, ...], error: Exception) -> str | None:
    """What in ``args`` made the launch fail and what to pass instead; None when the arguments look right."""
    if kernel.num_args != len(args):
        return (
            f"the kernel takes {kernel.num_args} arguments and was given {len(args)}; pass execute the kernel's "
            "arguments in the order of its parameters"
        )
    hint = argument_hint(args)
    if not hint:
        return None
    return f"the launch was refused ({first_error_line(str(error)).rstrip(': ')}): {hint}"


def _with_hint(error: str, args: tuple[Any, ...]) -> str:
    hint = argument_hint(args)
    return f"{error.rstrip(': ')} ({hint})" if hint else error


class _PrepareHook:
    """A variant's prepare hook; the tuner hands the hooks of one template and client over together."""

    def __init__(self, variant: _Variant[Any]) -> None:
        self.variant = variant
        self.together = (id(variant.template), id(variant.client))

    def __call__(self, *inputs: Any) -> None:
        self.variant.prepare(*inputs)

    def report_first_run(
        self, inputs: tuple[Any, ...], outputs: Sequence[int], report: Callable[[tuple[Any, ...]], None] | None
    ) -> None:
        """Have a compile worker's first launch of this variant on ``inputs`` hand ``outputs`` to ``report``
        (``tunekit._measure.prepare.ReportsFirstRun``)."""
        self.variant.first_run = None if report is None else FirstRun(inputs, tuple(outputs), report)

    def prepare_together(self, hooks: Sequence[object], inputs: tuple[Any, ...]) -> str | None:
        """Compile these hooks' variants as few programs (in worker processes when the client has them)."""
        return compile_together([h.variant for h in hooks if isinstance(h, _PrepareHook)], inputs)
