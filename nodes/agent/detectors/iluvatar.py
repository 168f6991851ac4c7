"""Iluvatar CoreX cards via ``ixsmi``, which implements nvidia-smi's ``--query-gpu`` interface."""

from .nvidia import NvidiaSmiCompatibleDetector, query_gpu_command


class IluvatarDetector(NvidiaSmiCompatibleDetector):
    gpu_type = "iluvatar"
    commands = (query_gpu_command("ixsmi"),)
