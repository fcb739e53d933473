package main

// Temporary: keeps the dependency set in go.mod while the packages that use
// it are written.
import (
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/gin-gonic/gin"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/redis/go-redis/v9"
	_ "go.uber.org/goleak"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
)
