module github.com/holdline/holdline

go 1.26.0

require (
	github.com/coder/websocket v1.8.15
	github.com/google/jsonschema-go v0.4.3
	github.com/sashabaranov/go-openai v1.43.0
	github.com/yalue/onnxruntime_go v1.27.0
	golang.org/x/sync v0.24.0
	golang.org/x/term v0.47.0
	gopkg.in/yaml.v3 v3.0.1
)

require golang.org/x/sys v0.49.0 // indirect
