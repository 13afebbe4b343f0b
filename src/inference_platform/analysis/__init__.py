"""Judging versions and GPUs from config: the PromQL comparing each canary and shadow with its
primary (rules, alerts, `infra analyze`), the dashboards over it, and the GPU capacity plan."""
