"""Readers for what certification workloads print: nccl-tests tables and training step lines.

Pure text in, plain data out. The same modules also write the nccl-tests table format, so the
local executor prints exactly what the parser reads (`nccl_writer.format_run`). Training frameworks are
described by log profiles kept as data under `dsx/catalog/log_profiles/`.
"""
