package ownership

// PlanCluster is the cluster a plan writes into owner markers and policy
// headers for a cluster it does not know (manifests are of no cluster).
const PlanCluster = "this-cluster"
