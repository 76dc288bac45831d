"""Demo factory, metering part: pools, models, deployments, capacity and a month of usage.

Grounded in shared/design/demo-factory.md: R_ref from the TensorRT-LLM perf overview with
MLPerf server/offline derates; SLO tiers from MLPerf Inference server limits; traffic 3:1
input:output with half of the input served from the prefix cache. Past days are written as
hourly rollups (marked `is_demo`); the last day is request-level events drawn from the same
per-request distributions, so the two meet without a step; one tenant's arrivals and request
sizes follow the real Azure LLM code trace (Splitwise, CC-BY-4.0). The last day also gets
engine telemetry with two deployment-hours off tolerance, for the reconciliation view.
Fixed seed: reproducible.
"""
