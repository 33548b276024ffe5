// Package deploy holds the configurations operators run Holdline with —
// Kamailio and HAProxy as the front doors, Redis for shared sessions,
// systemd units for workers, Prometheus rules and a Grafana dashboard —
// and the tests that run those files as shipped: a cluster of workers in
// network namespaces behind them, through rolling restarts, a killed
// worker and a hung one.
package deploy
