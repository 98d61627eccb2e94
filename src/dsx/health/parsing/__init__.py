"""Outside text and objects → health events: nothing here knows the pipeline or its stages.

Xid, SXid and lost-GPU kernel-log lines (`xid`), nvidia-smi and DCGM reports (`gpu_reports`,
`dcgm_diag`, `reports`), the `POST /v1/events` body (`ingest`), CEL node policies over Node
objects (`kube_objects`) and Node Problem Detector's Events (`node_events`).
"""
