// Package ui holds the live dashboard every edge serves at /ui: one page
// of plain HTML, CSS and JavaScript (no framework, no build step, nothing
// fetched from elsewhere at run time), embedded in the binary.
//
// The page holds no data and no credentials of its own: it asks its user
// for an API key or bearer token, keeps it in the tab's sessionStorage,
// and reads everything from the edge's API with it — the agent list, A2A
// 1.0 JSON-RPC (ListTasks, GetTask, SendStreamingMessage, SendMessage,
// CancelTask, SubscribeToTask) and a2abus's task feed (a2abus.WatchTasks),
// and for admins /metrics and the dead letters — so it sees exactly what
// its credentials may see. The edge serves it (edge/dashboard.go) with a
// Content-Security-Policy that allows only its own scripts and styles.
//
// It depends on nothing but the standard library.
package ui

import "embed"

// Files are the page's assets: index.html, app.css, app.js.
//
//go:embed index.html app.css app.js
var Files embed.FS
