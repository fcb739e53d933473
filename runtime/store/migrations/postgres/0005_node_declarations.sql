-- 0005_node_declarations: what an operator declared for a node (the
-- provider's llmplat_onprem_node), beside what its agent registers in
-- nodes: the agent's command line inputs, so an import can read them back,
-- and the inventory fields (gpu_count, labels) that /admin/nodes shows. A
-- declaration may precede the node's first registration, so node_id does
-- not reference nodes. NULL gpu_count or labels means "not declared".
CREATE TABLE node_declarations (
    node_id          TEXT PRIMARY KEY,
    orchestrator_url TEXT NOT NULL,
    engine_url       TEXT NOT NULL DEFAULT '',
    models           JSONB NOT NULL CHECK (jsonb_typeof(models) = 'array'),
    gpu_count        INTEGER CHECK (gpu_count > 0),
    labels           JSONB CHECK (labels IS NULL OR jsonb_typeof(labels) = 'object'),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
