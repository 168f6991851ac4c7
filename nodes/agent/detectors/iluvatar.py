"""Iluvatar CoreX cards via ``ixsmi``, which implements nvidia-smi's ``--query-gpu`` interface."""

from .nvidia import NvidiaSmiCompatibleDetector


class IluvatarDetector(NvidiaSmiCompatibleDetector):
    gpu_type = "iluvatar"
    executable = "ixsmi"
