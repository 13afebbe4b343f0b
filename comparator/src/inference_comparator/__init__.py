"""The payload comparator: does a model's shadow answer the same as its primary?

Envoy's ext_proc filter, in observability mode, streams every HTTP exchange of the primary and of
each shadow to this process; it joins them by request id and compares the responses.
"""

__version__ = "0.1.0"
