// Package charttest tests the Helm chart in ../gateway: helm lint --strict and
// helm template for each values file in ../gateway/ci, every rendered manifest
// decoded strictly into the k8s.io/api types (an unknown field fails), the key
// settings checked per values file, the chart's refusals (fail) checked, and
// the values reference in ../gateway/README.md compared with values.yaml.
//
// It is a module of its own so that the Kubernetes and Helm dependencies stay
// out of the gateway's go.mod; the root module's ./... does not descend here.
// scripts/test-deploy.sh runs it (cd charts/test && go test ./...). helm is
// the binary named by $HELM, else $HOME/.cache/uagate-tools/bin/helm, which
// scripts/test-deploy.sh builds once from helm.sh/helm/v3.
package charttest
