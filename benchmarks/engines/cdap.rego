# cdap.policy (rules/cdap.policy with the generic rules of
# rules/prelude/requirements.policy) in Rego, for the operations the engines
# benchmark measures: dataset.read, dataset.list, namespace.get,
# namespace.delete, application.deploy, dataset.create, and the datasets of a
# namespace a principal sees. Written by hand from the policy; benchmarks/engines checks
# that it answers every request of its mix as privilog's reference engine does.
#
# data (built from a privilog world by benchmarks/engines/rego.py):
#   grants[principal][entity][action] = true   every grant, on existing entities or not
#   members[principal] = [group or role, ...]  direct memberships; every group is a key
#   inside[place][type] = [entity, ...]        existing entities strictly inside a
#                                              namespace or application, by type
#   held_in[principal][place][type][entity] = true
#                                              the grants of `grants` on existing entities,
#                                              by the namespace or application they are in
#   within[principal][place] = true            the principal holds a grant on an id inside
#                                              `place` by its id, whether it exists or not
# input: {"principal", "operation", "entity", "args": {name: value}}
#   visible: {"principal", "namespace", "type"}

package cdap

import rego.v1

default allow := false

# The principal, and every group or role it is in, directly or through others.
principals contains input.principal

principals contains g if some g in graph.reachable(data.members, {input.principal})

# A principal holds an action on an entity through its own grant or a group's.
holds(action, entity) if {
	some p in principals
	data.grants[p][entity][action]
}

# `any`: READ, WRITE, EXECUTE or ADMIN (a grant key exists only with an action).
holds_any(entity) if {
	some p in principals
	data.grants[p][entity]
}

# The entity's type is the one the operation acts on (fail closed otherwise).
of_type(t) if startswith(input.entity, concat("", [t, ":"]))

# dataset.read requires READ
allow if {
	input.operation == "dataset.read"
	of_type("dataset")
	holds("READ", input.entity)
}

# dataset.list shows any
allow if {
	input.operation == "dataset.list"
	of_type("dataset")
	holds_any(input.entity)
}

# namespace.get requires any on self or within: a grant on the namespace or on any id
# inside it by its id, whether that entity exists or not (a pre-grant counts: the
# policy's `self or within`, CDAP's InMemoryAuthorizer reading grants by id).
allow if {
	input.operation == "namespace.get"
	of_type("namespace")
	self_or_within_any(input.entity)
}

self_or_within_any(e) if holds_any(e)

self_or_within_any(e) if {
	some p in principals
	data.within[p][e]
}

# namespace.delete requires ADMIN, ADMIN on every descendant
allow if {
	input.operation == "namespace.delete"
	of_type("namespace")
	holds("ADMIN", input.entity)
	every entities in object.get(data.inside, input.entity, {}) {
		every d in entities {
			holds("ADMIN", d)
		}
	}
}

# application.deploy($artifact, $new_artifact, $owner) requires ADMIN,
#   ADMIN on $artifact if $new_artifact else any on $artifact,
#   ADMIN on $owner if $owner
allow if {
	input.operation == "application.deploy"
	of_type("application")
	holds("ADMIN", input.entity)
	artifact_ok
	owner_ok
}

new_artifact if lower(trim_space(input.args.new_artifact)) in {"true", "yes", "1", "on"}

artifact_ok if {
	new_artifact
	holds("ADMIN", input.args.artifact)
}

artifact_ok if {
	not new_artifact
	holds_any(input.args.artifact)
}

owner_ok if not input.args.owner

owner_ok if holds("ADMIN", input.args.owner)

# dataset.create($dataset_type, $owner) requires ADMIN,
#   any on $dataset_type if $dataset_type, ADMIN on $owner if $owner
# (on a dataset that does not exist yet: ADMIN granted before it exists)
allow if {
	input.operation == "dataset.create"
	of_type("dataset")
	holds("ADMIN", input.entity)
	dataset_type_ok
	owner_ok
}

dataset_type_ok if not input.args.dataset_type

dataset_type_ok if holds_any(input.args.dataset_type)

# The existing entities of a type inside a namespace the principal may list
# (dataset.list and the other `list shows any` operations: any privilege on it).
visible contains d if {
	some p in principals
	some d, _ in data.held_in[p][input.namespace][input.type]
}
