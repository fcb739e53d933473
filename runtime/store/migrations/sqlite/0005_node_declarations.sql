-- 0005_node_declarations: what an operator declared for a node (the
-- provider's llmplat_onprem_node), beside what its agent registers in
-- nodes: the agent's command line inputs, so an import can read them back,
-- and the inventory fields (gpu_count, labels) that /admin/nodes shows. A
-- declaration may precede the node's first registration, so node_id does
-- not reference nodes. NULL gpu_count or labels means "not declared".
CREATE TABLE node_declarations (
    node_id          TEXT NOT NULL PRIMARY KEY,
    orchestrator_url TEXT NOT NULL,
    engine_url       TEXT NOT NULL DEFAULT '',
    models           TEXT NOT NULL CHECK (json_valid(models) AND json_type(models) = 'array'),
    gpu_count        INTEGER CHECK (gpu_count > 0),
    labels           TEXT CHECK (labels IS NULL OR (json_valid(labels) AND json_type(labels) = 'object')),
    updated_at       TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'))
);
