# The llmplat image: one static binary (gateway, orchestrator, node agent,
# modelsync, render, plan). Build for the nodes' architecture, whatever the
# builder's: docker build --platform linux/amd64 -t <registry>/llmplat:<version> .
# The Go stage runs on the builder's own platform and cross-compiles (no
# emulation): a binary built for the laptop (arm64 on Apple silicon) fails
# on every amd64 node with "exec format error".
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOTOOLCHAIN=local GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w" -o /out/llmplat ./runtime/cmd/llmplat

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/llmplat /llmplat
USER nonroot
ENTRYPOINT ["/llmplat"]
