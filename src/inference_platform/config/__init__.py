"""The lowest layer: the base every config model derives from, the value types Kubernetes imposes,
how much config a program reads, and config problems as people read them."""
