"""`infra rehearse`: the real `pulumi preview`, `up`, a second `up` and `destroy` of a stack, by the
real engine and Kubernetes provider, against a throwaway control plane on loopback whose KWOK
nodes are shaped like the stack's GPU and NPU nodes (docs/rehearsal.md).

- processes.py: the children it starts, and every one of them stopped, also on Ctrl-C.
- control_plane.py: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK, and a
  small client of the API server's REST interface.
- engine.py: the Pulumi CLI through the Automation API (the program runs in this process, as an
  inline program), the charts and manifests from their pinned local copies.
- command.py: the steps, the placement, the report; what it decides is in analysis/rehearsal.py.
"""
