"""A local Kubernetes control plane with simulated GPU nodes (`dsx sim`).

Real etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback, with kwok
playing the kubelets of fake GPU nodes. Used by users to try dsx without a fleet and by the
integration suite as its cluster. See docs/sim.md.
"""
