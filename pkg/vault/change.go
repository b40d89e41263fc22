package vault

// Change is one write the operator would make, as a plan shows it.
type Change struct {
	// Action is "create", "update" or "delete".
	Action string `json:"action"`
	// Kind is "approle-role", "entity", "entity-alias" or "acl-policy".
	Kind string `json:"kind"`
	// Path is the Vault API path written.
	Path string `json:"path"`
	// Before and After are the object's relevant content: role parameters
	// (map), entity metadata (map of strings), alias fields (map) or policy
	// text (string). Before is nil for a create, After for a delete.
	Before any `json:"before,omitempty"`
	After  any `json:"after,omitempty"`
}

// A Change's actions.
const (
	ChangeCreate = "create"
	ChangeUpdate = "update"
	ChangeDelete = "delete"
)

// Placeholder stands for a value Vault only assigns when the write is made
// (a new role's role ID, a new entity's ID).
const Placeholder = "(known after apply)"
