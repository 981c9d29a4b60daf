#!/usr/bin/python3
"""Pushes a copy of a registry image with KEY=VALUE entries added to its
config's Env (a new config blob, manifest and tag; the layers are shared),
for tests of what an image's ENV does (NVIDIA_VISIBLE_DEVICES of CUDA
images).  Plain-HTTP registries only (the test registry).

  image_with_env.py WORKDIR SRC_REF DST_REF KEY=VALUE...
"""
import hashlib
import json
import os
import subprocess
import sys


def blob_path(layout, digest):
    return os.path.join(layout, "blobs", *digest.split(":", 1))


def put_blob(layout, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with open(blob_path(layout, digest), "wb") as f:
        f.write(data)
    return digest


def main():
    work, src, dst, env = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    layout = os.path.join(work, "image-with-env")
    skopeo = ["skopeo", "--insecure-policy", "copy", "--quiet"]
    subprocess.run(skopeo + ["--src-tls-verify=false", "docker://" + src, f"oci:{layout}:latest"], check=True)
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    desc = index["manifests"][0]
    with open(blob_path(layout, desc["digest"]), "rb") as f:
        manifest = json.load(f)
    with open(blob_path(layout, manifest["config"]["digest"]), "rb") as f:
        config = json.load(f)
    config["config"]["Env"] = config["config"].get("Env", []) + env
    data = json.dumps(config).encode()
    manifest["config"] = dict(manifest["config"], digest=put_blob(layout, data), size=len(data))
    data = json.dumps(manifest).encode()
    index["manifests"] = [dict(desc, digest=put_blob(layout, data), size=len(data))]
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump(index, f)
    subprocess.run(skopeo + ["--dest-tls-verify=false", f"oci:{layout}:latest", "docker://" + dst], check=True)


main()
