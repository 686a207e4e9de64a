#!/usr/bin/env python3
"""Checks `policyc export cilium` output against the CiliumNetworkPolicy CRD.

Each file given must parse as YAML and hold the fields and value shapes the
CRD (cilium.io/v2, pkg/k8s/apis/cilium.io/client/crds/v2) requires: the
patterns of matchName/matchPattern and port, the protocol enum, CIDRs, and
no field the CRD does not have. Exit 1, naming the file and the path, on the
first file that fails.
"""
import ipaddress
import re
import sys

import yaml

NAME = re.compile(r"^([-a-zA-Z0-9_]+[.]?)+$")
PATTERN = re.compile(r"^([-a-zA-Z0-9_*]+[.]?)+$")
PORT = re.compile(
    r"^(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})$"
)
PROTOCOLS = {"TCP", "UDP", "SCTP", "ICMP", "ICMPv6", "VRRP", "IGMP", "ANY"}
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
EGRESS_KEYS = {"toEndpoints", "toFQDNs", "toCIDRSet", "toCIDR", "toEntities", "toPorts", "toServices", "toGroups", "toRequires", "toNodes", "icmps", "authentication"}
DENY_KEYS = {"toEndpoints", "toCIDRSet", "toCIDR", "toEntities", "toPorts", "toServices", "toGroups", "toRequires", "toNodes", "icmps"}
ENTITIES = {"all", "world", "cluster", "host", "remote-node", "kube-apiserver", "ingress", "init", "health", "unmanaged", "none"}


class Bad(Exception):
    pass


def need(cond, path, what):
    if not cond:
        raise Bad(f"{path}: {what}")


def fqdn_selector(sel, path):
    need(isinstance(sel, dict) and len(sel) == 1, path, "one of matchName or matchPattern")
    (key, value), = sel.items()
    need(key in ("matchName", "matchPattern"), path, f"unknown key {key}")
    need(isinstance(value, str) and len(value) <= 255, path, "a string of at most 255")
    need((NAME if key == "matchName" else PATTERN).match(value), path, f"{value!r} does not match the CRD pattern")


def ports(rule, path):
    need(isinstance(rule, list), path, "a list")
    for i, pr in enumerate(rule):
        p = f"{path}[{i}]"
        need(set(pr) <= {"ports", "rules", "terminatingTLS", "originatingTLS", "serverNames", "listener"}, p, f"unknown keys {set(pr)}")
        plist = pr.get("ports", [])
        need(isinstance(plist, list) and len(plist) <= 40, p, "at most 40 ports")
        for j, port in enumerate(plist):
            q = f"{p}.ports[{j}]"
            need(set(port) <= {"port", "endPort", "protocol"}, q, f"unknown keys {set(port)}")
            need(isinstance(port.get("port"), str) and PORT.match(port["port"]), q, "port: a quoted number 0-65535")
            if "endPort" in port:
                need(isinstance(port["endPort"], int) and int(port["port"]) <= port["endPort"] <= 65535, q, "endPort: a number from port to 65535")
            need(port.get("protocol", "ANY") in PROTOCOLS, q, "protocol: one of the enum")
        for j, sel in enumerate(pr.get("rules", {}).get("dns", [])):
            fqdn_selector(sel, f"{p}.rules.dns[{j}]")


def cidrs(items, path):
    need(isinstance(items, list) and items, path, "a non-empty list")
    for i, item in enumerate(items):
        p = f"{path}[{i}]"
        need(set(item) <= {"cidr", "except", "cidrGroupRef", "cidrGroupSelector"}, p, f"unknown keys {set(item)}")
        net = ipaddress.ip_network(item["cidr"])
        for e in item.get("except", []):
            need(ipaddress.ip_network(e).subnet_of(net), p, f"except {e} outside {net}")


def rules(spec, key, allowed, path):
    for i, rule in enumerate(spec.get(key) or []):
        p = f"{path}.{key}[{i}]"
        need(isinstance(rule, dict) and set(rule) <= allowed, p, f"unknown keys {set(rule) - allowed}")
        for j, sel in enumerate(rule.get("toFQDNs", [])):
            fqdn_selector(sel, f"{p}.toFQDNs[{j}]")
        if "toCIDRSet" in rule:
            cidrs(rule["toCIDRSet"], f"{p}.toCIDRSet")
        if "toPorts" in rule:
            ports(rule["toPorts"], f"{p}.toPorts")
        for e in rule.get("toEntities", []):
            need(e in ENTITIES, p, f"unknown entity {e}")


def check(doc):
    need(doc.get("apiVersion") == "cilium.io/v2", "apiVersion", "cilium.io/v2")
    need(doc.get("kind") == "CiliumNetworkPolicy", "kind", "CiliumNetworkPolicy")
    meta = doc.get("metadata", {})
    need(set(meta) <= {"name", "namespace", "labels", "annotations"}, "metadata", "known keys")
    need(isinstance(meta.get("name"), str) and len(meta["name"]) <= 253 and DNS1123.match(meta["name"]), "metadata.name", "a DNS-1123 subdomain")
    spec = doc.get("spec")
    need(isinstance(spec, dict), "spec", "an object")
    need(set(spec) <= {"endpointSelector", "egress", "egressDeny", "ingress", "ingressDeny", "enableDefaultDeny", "description", "labels"}, "spec", f"unknown keys {set(spec)}")
    need(isinstance(spec.get("endpointSelector"), dict), "spec.endpointSelector", "required")
    need(set(spec.get("enableDefaultDeny", {})) <= {"egress", "ingress"}, "spec.enableDefaultDeny", "egress/ingress")
    rules(spec, "egress", EGRESS_KEYS, "spec")
    rules(spec, "egressDeny", DENY_KEYS, "spec")


def main(paths):
    for path in paths:
        try:
            with open(path) as f:
                docs = list(yaml.safe_load_all(f))
            need(len(docs) == 1, "", "one document")
            check(docs[0])
        except (Bad, yaml.YAMLError, ValueError, KeyError, TypeError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 1
    print(f"{len(paths)} CiliumNetworkPolicy documents valid")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
