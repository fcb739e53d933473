// Package rdssecret reads the PostgreSQL password from the Secrets
// Manager secret RDS manages for Aurora's master user
// (manage_master_user_password): a JSON object with "username" and
// "password", which RDS rotates every seven days.
//
// The gateway and the orchestrator are given the secret's ARN, never the
// password. Source is a store.PasswordSource: the store reads the password
// when it opens its first connection, keeps it, and reads it again when
// PostgreSQL refuses it (SQLSTATE 28P01, after a rotation), so a rotation
// costs no failed connection once Secrets Manager holds the new password.
// The AWS credentials are the pod's own (EKS Pod Identity, found by the
// SDK's default chain); the role may read that one secret and nothing
// else.
package rdssecret
