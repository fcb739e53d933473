# The llmplat image: one static binary (gateway, orchestrator, node agent,
# modelsync, render, plan). Build: docker build -t <registry>/llmplat:<version> .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath -ldflags "-s -w" -o /out/llmplat ./runtime/cmd/llmplat

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/llmplat /llmplat
USER nonroot
ENTRYPOINT ["/llmplat"]
