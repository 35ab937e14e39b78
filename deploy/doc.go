// Package deploy holds svc's deployment files and their tests: the compose
// layout's OPA authorization policy (opa/), the LiteLLM proxy
// configurations and image (litellm/) and the systemd units (systemd/).
// The tests check docker-compose.yml, the Dockerfiles, .dockerignore and the
// units statically, run the real opa with the authorization policy, verify
// the units with systemd-analyze and run their command lines by hand
// (docs/deploy.md). The package has no Go code of its own.
package deploy
