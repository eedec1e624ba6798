"""The fold between read and commit: inbound entries decoded, applied to the turns' machines,
and committed in one lease-fenced script per batch, with the snapshots it stores."""
