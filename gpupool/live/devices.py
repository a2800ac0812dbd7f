"""GPU discovery for the live pool: NVML when there is a driver, else the pool's declared devices.

Slurm's ``gres.conf AutoDetect=nvml`` lists each whole GPU, and each MIG instance of a GPU in
MIG mode as a separate device (the parent GPU itself is then not schedulable); we do the same.
A machine without NVML (this CI host, a laptop) uses the GPUs the pool declares for the node
as *fake devices*: the scheduler and the job environment treat them exactly like real ones,
only nothing checks that a process really uses them.
"""
from __future__ import annotations

from dataclasses import dataclass

from gpupool.model.pool import Gpu


@dataclass(frozen=True, slots=True)
class Device:
    """One schedulable device of this host.

    ``index`` is the node-local index the engine's GPU masks use; ``visible`` is what goes into
    ``CUDA_VISIBLE_DEVICES`` for it (the GPU's index, or a MIG instance's UUID, which is how
    CUDA addresses MIG devices).
    """

    index: int
    visible: str
    type: str | None = None
    mig_profile: str | None = None
    parent: int | None = None
    uuid: str | None = None
    memory_mib: int = 0
    fake: bool = False

    def as_gpu(self) -> Gpu:
        return Gpu(index=self.index, type=self.type, mig_profile=self.mig_profile, parent=self.parent)


def slurm_type_name(product: str) -> str:
    """NVML's product name as Slurm's AutoDetect types it: ``NVIDIA H100 80GB HBM3`` -> ``h100_80gb_hbm3``."""
    name = product.strip()
    for prefix in ("NVIDIA ", "Tesla ", "GeForce "):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return "_".join(name.lower().replace("-", "_").split())


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_devices() -> list[Device] | None:
    """Devices NVML reports, MIG instances as separate devices; None without NVML or a driver."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, DriverNotLoaded, …: no GPUs here
        return None
    try:
        out: list[Device] = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            product = _text(pynvml.nvmlDeviceGetName(handle))
            gtype = slurm_type_name(product)
            try:
                mig_current, _ = pynvml.nvmlDeviceGetMigMode(handle)
            except Exception:  # not MIG-capable
                mig_current = 0
            if mig_current:
                for m in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
                    try:
                        mh = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, m)
                    except Exception:  # slot without an instance
                        continue
                    uuid = _text(pynvml.nvmlDeviceGetUUID(mh))
                    mem = pynvml.nvmlDeviceGetMemoryInfo(mh).total // (1024 * 1024)
                    profile = _mig_profile(pynvml, mh, mem)
                    out.append(Device(index=len(out), visible=uuid, type=f"{gtype}_{profile}".replace(".", "_"),
                                      mig_profile=profile, parent=i, uuid=uuid, memory_mib=int(mem)))
            else:
                uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
                out.append(Device(index=len(out), visible=str(i), type=gtype, uuid=uuid, memory_mib=int(mem)))
        return out
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _mig_profile(pynvml, handle, mem_mib: int) -> str:
    """``1g.10gb``-style profile of a MIG instance (its slice count and memory)."""
    try:
        attrs = pynvml.nvmlDeviceGetAttributes(handle)
        slices = attrs.gpuInstanceSliceCount
        gb = round(attrs.memorySizeMB / 1024) if attrs.memorySizeMB else round(mem_mib / 1024)
        return f"{slices}g.{gb}gb"
    except Exception:
        return f"mig.{round(mem_mib / 1024)}gb"


def declared_devices(gpus: tuple[Gpu, ...]) -> list[Device]:
    """The pool's declared GPUs of a node as fake devices (CUDA_VISIBLE_DEVICES = their index)."""
    return [Device(index=k, visible=str(g.index), type=g.type, mig_profile=g.mig_profile, parent=g.parent,
                   fake=True) for k, g in enumerate(gpus)]


def discover(declared: tuple[Gpu, ...], mode: str = "auto") -> list[Device]:
    """The host's devices. ``mode``: ``nvml`` (fail without NVML), ``declared`` (fake devices
    from the pool), or ``auto`` (NVML when it finds at least one device, else declared)."""
    from gpupool.errors import GpupoolError

    if mode not in ("auto", "nvml", "declared"):
        raise GpupoolError(f"--devices: expected auto, nvml or declared, got {mode!r}")
    if mode == "declared":
        return declared_devices(declared)
    found = nvml_devices()
    if mode == "nvml":
        if found is None:
            raise GpupoolError("--devices nvml: NVML is not available on this host (no NVIDIA driver or "
                               "nvidia-ml-py); use --devices declared to run with the pool's declared GPUs")
        return found
    return found if found else declared_devices(declared)
