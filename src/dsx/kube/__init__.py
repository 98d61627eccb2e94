"""The Kubernetes adapter: the only package that imports a Kubernetes client (lightkube).

`KubeClient` is built from a kubeconfig path and speaks plain dicts; every client failure
is translated into the dsx error tree at this seam (`dsx.kube.translation`). Watches resume
after 410 Gone by relisting (`dsx.kube.watch`). See docs/adr/0004-kubernetes-client.md.
"""
