/* The CRI client of the VM tests (test code): the unary verbs of
 * test/e2e/cri_cli.py, with its flags and output, in C.  Under the VM's
 * software emulation Python with grpcio takes ~10 s to start, this ~50 ms.
 *
 *   cri_cli [-r unix://SOCK] [-t 30s] VERB ARGS...
 *   verbs: version runp create start stop [-t N] rm stopp rmp pods
 *          ps [-a] [-q] [--no-trunc] [--state S] inspect inspectp
 *          exec -s CID CMD... (ExecSync) checkpoint --export=PATH CID
 *
 * Pod and container configs are JSON files with protobuf's field names
 * (snake_case or lowerCamelCase), enums by number or name, as crictl
 * reads them.  inspect* print {"status": ..., KEY: INFO...} with
 * lowerCamelCase keys, as crictl does. */
#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/server/cri_json.h"
#include "cri/spec/proto_copy.h"
#include "cri/proto/api.pb-c.h"

static const char *endpoint = "unix:///run/husk/husk.sock";
static long timeout_ms = 30000;
static grpc_channel *channel;

static void
die (const char *fmt, const char *what)
{
  fprintf (stderr, "cri_cli: ");
  fprintf (stderr, fmt, what);
  fputc ('\n', stderr);
  exit (1);
}

/* ------------------------------------------------------------ JSON -> protobuf */

static const ProtobufCFieldDescriptor *
field_named (const ProtobufCMessageDescriptor *d, const char *key)
{
  for (unsigned i = 0; i < d->n_fields; i++)
    {
      const char *name = d->fields[i].name, *k = key;
      /* snake_case matches as it is, lowerCamelCase with each '_x' as 'X'. */
      if (strcmp (name, key) == 0)
        return &d->fields[i];
      for (; *name && *k; name++, k++)
        {
          if (*name == '_' && name[1] && (name[1] - 'a' + 'A') == *k)
            name++;
          else if (*name != *k)
            break;
        }
      if (*name == '\0' && *k == '\0')
        return &d->fields[i];
    }
  return NULL;
}

static int message_from_json (ProtobufCMessage *msg, json_t *obj, const char *where);

static int
scalar_from_json (const ProtobufCFieldDescriptor *f, void *p, json_t *v, const char *where)
{
  json_int_t n = json_is_string (v) ? strtoll (json_string_value (v), NULL, 10) : json_integer_value (v);

  switch (f->type)
    {
    case PROTOBUF_C_TYPE_ENUM:
      if (json_is_string (v))
        {
          const ProtobufCEnumValue *e
              = protobuf_c_enum_descriptor_get_value_by_name (f->descriptor, json_string_value (v));
          if (e == NULL)
            die ("unknown enum value in %s", where);
          n = e->value;
        }
      /* fall through */
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      *(int32_t *) p = (int32_t) n;
      return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      *(int64_t *) p = n;
      return 8;
    case PROTOBUF_C_TYPE_BOOL:
      *(protobuf_c_boolean *) p = json_is_true (v);
      return sizeof (protobuf_c_boolean);
    case PROTOBUF_C_TYPE_FLOAT:
      *(float *) p = (float) json_number_value (v);
      return 4;
    case PROTOBUF_C_TYPE_DOUBLE:
      *(double *) p = json_number_value (v);
      return 8;
    case PROTOBUF_C_TYPE_STRING:
      if (!json_is_string (v))
        die ("%s: want a string", where);
      *(char **) p = strdup (json_string_value (v));
      return sizeof (char *);
    case PROTOBUF_C_TYPE_MESSAGE:
      {
        const ProtobufCMessageDescriptor *d = f->descriptor;
        ProtobufCMessage *m = calloc (1, d->sizeof_message);
        d->message_init (m);
        message_from_json (m, v, where);
        *(ProtobufCMessage **) p = m;
        return sizeof (void *);
      }
    case PROTOBUF_C_TYPE_BYTES:
      die ("%s: bytes fields are not read", where);
    }
  return 0;
}

/* A JSON object as a map field: one KeyValue-like entry per key. */
static void
map_from_json (ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f, json_t *obj, const char *where)
{
  const ProtobufCMessageDescriptor *d = f->descriptor;
  ProtobufCMessage **entries = calloc (json_object_size (obj) + 1, sizeof *entries);
  const char *key;
  json_t *value;
  size_t n = 0;

  json_object_foreach (obj, key, value)
  {
    ProtobufCMessage *e = calloc (1, d->sizeof_message);
    json_t *k = json_string (key);
    d->message_init (e);
    scalar_from_json (&d->fields[0], (char *) e + d->fields[0].offset, k, where);
    scalar_from_json (&d->fields[1], (char *) e + d->fields[1].offset, value, where);
    json_decref (k);
    entries[n++] = e;
  }
  *(size_t *) ((char *) msg + f->quantifier_offset) = n;
  *(void **) ((char *) msg + f->offset) = entries;
}

static int
message_from_json (ProtobufCMessage *msg, json_t *obj, const char *where)
{
  const char *key;
  json_t *v;

  if (!json_is_object (obj))
    die ("%s: want an object", where);
  json_object_foreach (obj, key, v)
  {
    const ProtobufCFieldDescriptor *f = field_named (msg->descriptor, key);
    char *p;

    if (f == NULL)
      {
        fprintf (stderr, "cri_cli: %s: unknown field `%s` in %s\n", where, key, msg->descriptor->name);
        exit (1);
      }
    p = (char *) msg + f->offset;
    if (f->label == PROTOBUF_C_LABEL_REPEATED && json_is_object (v))
      map_from_json (msg, f, v, where);
    else if (f->label == PROTOBUF_C_LABEL_REPEATED)
      {
        size_t size = cri_proto_element_size (f), n = json_array_size (v);
        char *values = calloc (n + 1, size);

        for (size_t i = 0; i < n; i++)
          scalar_from_json (f, values + i * size, json_array_get (v, i), where);
        *(size_t *) ((char *) msg + f->quantifier_offset) = n;
        *(void **) p = values;
      }
    else
      {
        scalar_from_json (f, p, v, where);
        if (f->quantifier_offset && f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
          *(protobuf_c_boolean *) ((char *) msg + f->quantifier_offset) = 1;
      }
  }
  return 0;
}

static ProtobufCMessage *
read_config (const char *path, const ProtobufCMessageDescriptor *d)
{
  json_error_t err;
  json_t *obj = json_load_file (path, 0, &err);
  ProtobufCMessage *msg;

  if (obj == NULL)
    {
      fprintf (stderr, "cri_cli: %s: line %d: %s\n", path, err.line, err.text);
      exit (1);
    }
  msg = calloc (1, d->sizeof_message);
  d->message_init (msg);
  message_from_json (msg, obj, path);
  json_decref (obj);
  return msg;
}

/* ------------------------------------------------------------ protobuf -> JSON */

/* crictl's keys: lowerCamelCase, in place over the tree. */
static json_t *
camel_keys (json_t *v)
{
  if (json_is_array (v))
    {
      size_t i;
      json_t *e;
      json_array_foreach (v, i, e) camel_keys (e);
    }
  else if (json_is_object (v))
    {
      json_t *out = json_object ();
      const char *key;
      json_t *value;

      json_object_foreach (v, key, value)
      {
        char camel[256];
        size_t n = 0;
        for (const char *k = key; *k && n + 1 < sizeof camel; k++)
          camel[n++] = (*k == '_' && k[1] >= 'a' && k[1] <= 'z') ? (char) (*++k - 'a' + 'A') : *k;
        camel[n] = '\0';
        json_object_set (out, camel, camel_keys (value));
      }
      json_object_clear (v);
      json_object_update (v, out);
      json_decref (out);
    }
  return v;
}

/* The layout every verbose reply's `info` map entry shares. */
struct info_entry
{
  ProtobufCMessage base;
  char *key;
  char *value;
};

static void
print_verbose (const ProtobufCMessage *status, size_t n_info, struct info_entry **info)
{
  json_t *doc = json_object ();
  char *text;

  json_object_set_new (doc, "status", camel_keys (cri_message_json (status)));
  for (size_t i = 0; i < n_info; i++)
    {
      json_t *v = json_loads (info[i]->value, JSON_DECODE_ANY, NULL);
      json_object_set_new (doc, info[i]->key, v ? v : json_string (info[i]->value));
    }
  text = json_dumps (doc, JSON_INDENT (2));
  puts (text);
  free (text);
  json_decref (doc);
}

/* ------------------------------------------------------------ gRPC */

static ProtobufCMessage *
call (const char *service, const char *method, const ProtobufCMessage *request,
      const ProtobufCMessageDescriptor *reply_type)
{
  char path[128];
  size_t len = protobuf_c_message_get_packed_size (request);
  grpc_slice slice = grpc_slice_malloc (len), rslice;
  grpc_byte_buffer *send = NULL, *recv = NULL;
  grpc_metadata_array initial, trailing;
  grpc_status_code status;
  grpc_slice details;
  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck (NULL);
  gpr_timespec deadline
      = gpr_time_add (gpr_now (GPR_CLOCK_REALTIME), gpr_time_from_millis (timeout_ms, GPR_TIMESPAN));
  grpc_op ops[6];
  grpc_call *c;
  ProtobufCMessage *reply = NULL;

  protobuf_c_message_pack (request, GRPC_SLICE_START_PTR (slice));
  send = grpc_raw_byte_buffer_create (&slice, 1);
  grpc_slice_unref (slice);
  snprintf (path, sizeof path, "/runtime.v1.%s/%s", service, method);
  c = grpc_channel_create_call (channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                grpc_slice_from_static_string (path), NULL, deadline, NULL);
  grpc_metadata_array_init (&initial);
  grpc_metadata_array_init (&trailing);
  memset (ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  if (grpc_call_start_batch (c, ops, 6, (void *) 1, NULL) != GRPC_CALL_OK)
    die ("%s: cannot start the call", method);
  grpc_completion_queue_pluck (cq, (void *) 1, gpr_inf_future (GPR_CLOCK_REALTIME), NULL);
  if (status != GRPC_STATUS_OK)
    {
      char *text = grpc_slice_to_c_string (details);
      fprintf (stderr, "cri_cli: %s: rpc error: code = %d desc = %s\n", method, (int) status, text);
      exit (1);
    }
  if (recv)
    {
      grpc_byte_buffer_reader reader;
      grpc_byte_buffer_reader_init (&reader, recv);
      rslice = grpc_byte_buffer_reader_readall (&reader);
      reply = protobuf_c_message_unpack (reply_type, NULL, GRPC_SLICE_LENGTH (rslice),
                                         GRPC_SLICE_START_PTR (rslice));
      grpc_slice_unref (rslice);
      grpc_byte_buffer_reader_destroy (&reader);
      grpc_byte_buffer_destroy (recv);
    }
  if (reply == NULL)
    die ("%s: no reply, or one that does not parse", method);
  grpc_byte_buffer_destroy (send);
  grpc_slice_unref (details);
  grpc_metadata_array_destroy (&initial);
  grpc_metadata_array_destroy (&trailing);
  grpc_call_unref (c);
  grpc_completion_queue_shutdown (cq);
  grpc_completion_queue_destroy (cq);
  return reply;
}

#define RT(method, req, reply) call ("RuntimeService", method, &(req).base, &reply)

/* ------------------------------------------------------------ verbs */

/* Flags of a verb: -x or --long, with or without a value; the rest are
 * its operands, in order. */
struct args
{
  int all, quiet, force, sync;
  long stop_timeout;
  const char *state, *runtime, *export_path;
  int n;
  char **rest;
};

static void
parse_args (int argc, char **argv, struct args *a)
{
  memset (a, 0, sizeof *a);
  a->rest = calloc ((size_t) argc + 1, sizeof (char *));
  for (int i = 0; i < argc; i++)
    {
      const char *o = argv[i];
#define VALUE() (i + 1 < argc ? argv[++i] : (die ("%s needs a value", o), ""))
      if (a->n > 0 && a->sync)
        a->rest[a->n++] = argv[i]; /* exec's command, flags and all */
      else if (!strcmp (o, "-a") || !strcmp (o, "--all"))
        a->all = 1;
      else if (!strcmp (o, "-q") || !strcmp (o, "--quiet"))
        a->quiet = 1;
      else if (!strcmp (o, "-f") || !strcmp (o, "--force"))
        a->force = 1;
      else if (!strcmp (o, "-s") || !strcmp (o, "--sync"))
        a->sync = 1;
      else if (!strcmp (o, "--no-trunc"))
        ;
      else if (!strcmp (o, "-t") || !strcmp (o, "--timeout"))
        a->stop_timeout = strtol (VALUE (), NULL, 10);
      else if (!strcmp (o, "--state"))
        a->state = VALUE ();
      else if (!strcmp (o, "--runtime"))
        a->runtime = VALUE ();
      else if (!strcmp (o, "-e") || !strcmp (o, "--export"))
        a->export_path = VALUE ();
      else if (!strncmp (o, "--export=", 9))
        a->export_path = o + 9;
      else if (o[0] == '-' && o[1])
        die ("unknown option %s", o);
      else
        a->rest[a->n++] = argv[i];
#undef VALUE
    }
}

static void
need (const struct args *a, int n, const char *usage)
{
  if (a->n < n)
    die ("usage: %s", usage);
}

static void
verb_version (struct args *a)
{
  Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
  Runtime__V1__VersionResponse *r;

  (void) a;
  req.version = "v1";
  r = (Runtime__V1__VersionResponse *) RT ("Version", req, runtime__v1__version_response__descriptor);
  printf ("Version:  %s\nRuntimeName:  %s\nRuntimeVersion:  %s\nRuntimeApiVersion:  %s\n", r->version,
          r->runtime_name, r->runtime_version, r->runtime_api_version);
}

static void
verb_runp (struct args *a)
{
  Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
  Runtime__V1__RunPodSandboxResponse *r;

  need (a, 1, "runp [--runtime H] POD.json");
  req.config = (Runtime__V1__PodSandboxConfig *) read_config (a->rest[0],
                                                              &runtime__v1__pod_sandbox_config__descriptor);
  if (a->runtime)
    req.runtime_handler = (char *) a->runtime;
  r = (Runtime__V1__RunPodSandboxResponse *) RT ("RunPodSandbox", req,
                                                 runtime__v1__run_pod_sandbox_response__descriptor);
  puts (r->pod_sandbox_id);
}

static void
verb_create (struct args *a)
{
  Runtime__V1__CreateContainerRequest req = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
  Runtime__V1__CreateContainerResponse *r;

  need (a, 3, "create POD CONTAINER.json POD.json");
  req.pod_sandbox_id = a->rest[0];
  req.config
      = (Runtime__V1__ContainerConfig *) read_config (a->rest[1], &runtime__v1__container_config__descriptor);
  req.sandbox_config = (Runtime__V1__PodSandboxConfig *) read_config (
      a->rest[2], &runtime__v1__pod_sandbox_config__descriptor);
  r = (Runtime__V1__CreateContainerResponse *) RT ("CreateContainer", req,
                                                   runtime__v1__create_container_response__descriptor);
  puts (r->container_id);
}

/* One RPC taking an id per operand (start, stop, rm, stopp, rmp). */
static void
verb_each (struct args *a)
{
  for (int i = 0; i < a->n; i++)
    {
      const char *verb = a->rest[-1];
      if (!strcmp (verb, "start"))
        {
          Runtime__V1__StartContainerRequest req = RUNTIME__V1__START_CONTAINER_REQUEST__INIT;
          req.container_id = a->rest[i];
          RT ("StartContainer", req, runtime__v1__start_container_response__descriptor);
        }
      if (!strcmp (verb, "stop") || ((!strcmp (verb, "rm")) && a->force))
        {
          Runtime__V1__StopContainerRequest req = RUNTIME__V1__STOP_CONTAINER_REQUEST__INIT;
          req.container_id = a->rest[i];
          req.timeout = a->stop_timeout;
          timeout_ms += a->stop_timeout * 1000;
          RT ("StopContainer", req, runtime__v1__stop_container_response__descriptor);
        }
      if (!strcmp (verb, "rm"))
        {
          Runtime__V1__RemoveContainerRequest req = RUNTIME__V1__REMOVE_CONTAINER_REQUEST__INIT;
          req.container_id = a->rest[i];
          RT ("RemoveContainer", req, runtime__v1__remove_container_response__descriptor);
        }
      if (!strcmp (verb, "stopp") || (!strcmp (verb, "rmp") && a->force))
        {
          Runtime__V1__StopPodSandboxRequest req = RUNTIME__V1__STOP_POD_SANDBOX_REQUEST__INIT;
          req.pod_sandbox_id = a->rest[i];
          RT ("StopPodSandbox", req, runtime__v1__stop_pod_sandbox_response__descriptor);
        }
      if (!strcmp (verb, "rmp"))
        {
          Runtime__V1__RemovePodSandboxRequest req = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;
          req.pod_sandbox_id = a->rest[i];
          RT ("RemovePodSandbox", req, runtime__v1__remove_pod_sandbox_response__descriptor);
        }
      puts (a->rest[i]);
    }
}

static void
verb_ps (struct args *a)
{
  Runtime__V1__ListContainersRequest req = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
  Runtime__V1__ContainerFilter filter = RUNTIME__V1__CONTAINER_FILTER__INIT;
  Runtime__V1__ContainerStateValue state = RUNTIME__V1__CONTAINER_STATE_VALUE__INIT;
  Runtime__V1__ListContainersResponse *r;

  req.filter = &filter;
  if (a->state)
    {
      char name[64];
      const ProtobufCEnumValue *v;
      size_t n = 0;

      n = (size_t) snprintf (name, sizeof name, "CONTAINER_%s", a->state);
      for (size_t i = 10; i < n; i++)
        name[i] = (char) (name[i] >= 'a' && name[i] <= 'z' ? name[i] - 'a' + 'A' : name[i]);
      v = protobuf_c_enum_descriptor_get_value_by_name (&runtime__v1__container_state__descriptor, name);
      if (v == NULL)
        die ("unknown state %s", a->state);
      state.state = v->value;
      filter.state = &state;
    }
  r = (Runtime__V1__ListContainersResponse *) RT ("ListContainers", req,
                                                  runtime__v1__list_containers_response__descriptor);
  for (size_t i = 0; i < r->n_containers; i++)
    {
      Runtime__V1__Container *c = r->containers[i];
      if (!a->all && !a->state && c->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING)
        continue;
      if (a->quiet)
        puts (c->id);
      else
        printf (
            "%.13s\t%s\t%s\t%s\t%.13s\n", c->id, c->image ? c->image->image : "",
            protobuf_c_enum_descriptor_get_value (&runtime__v1__container_state__descriptor, c->state)->name,
            c->metadata ? c->metadata->name : "", c->pod_sandbox_id);
    }
}

static void
verb_pods (struct args *a)
{
  Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
  Runtime__V1__ListPodSandboxResponse *r;

  r = (Runtime__V1__ListPodSandboxResponse *) RT ("ListPodSandbox", req,
                                                  runtime__v1__list_pod_sandbox_response__descriptor);
  for (size_t i = 0; i < r->n_items; i++)
    if (a->quiet)
      puts (r->items[i]->id);
    else
      printf ("%.13s\t%s\n", r->items[i]->id, r->items[i]->metadata ? r->items[i]->metadata->name : "");
}

static void
verb_inspect (struct args *a)
{
  need (a, 1, "inspect ID");
  for (int i = 0; i < a->n; i++)
    {
      Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
      Runtime__V1__ContainerStatusResponse *r;
      req.container_id = a->rest[i];
      req.verbose = 1;
      r = (Runtime__V1__ContainerStatusResponse *) RT ("ContainerStatus", req,
                                                       runtime__v1__container_status_response__descriptor);
      print_verbose (&r->status->base, r->n_info, (struct info_entry **) r->info);
    }
}

static void
verb_update (struct args *a)
{
  Runtime__V1__UpdateContainerResourcesRequest req = RUNTIME__V1__UPDATE_CONTAINER_RESOURCES_REQUEST__INIT;

  need (a, 2, "update CID RESOURCES.json");
  req.container_id = a->rest[0];
  req.linux = (Runtime__V1__LinuxContainerResources *) read_config (
      a->rest[1], &runtime__v1__linux_container_resources__descriptor);
  RT ("UpdateContainerResources", req, runtime__v1__update_container_resources_response__descriptor);
}

static void
verb_inspectp (struct args *a)
{
  need (a, 1, "inspectp ID");
  for (int i = 0; i < a->n; i++)
    {
      Runtime__V1__PodSandboxStatusRequest req = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
      Runtime__V1__PodSandboxStatusResponse *r;
      req.pod_sandbox_id = a->rest[i];
      req.verbose = 1;
      r = (Runtime__V1__PodSandboxStatusResponse *) RT ("PodSandboxStatus", req,
                                                        runtime__v1__pod_sandbox_status_response__descriptor);
      print_verbose (&r->status->base, r->n_info, (struct info_entry **) r->info);
    }
}

static void
verb_exec (struct args *a)
{
  Runtime__V1__ExecSyncRequest req = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
  Runtime__V1__ExecSyncResponse *r;

  if (!a->sync)
    die ("%s", "exec: only -s (ExecSync) here; the streaming exec is test/e2e/cri_cli.py's");
  need (a, 2, "exec -s CID CMD...");
  req.container_id = a->rest[0];
  req.n_cmd = (size_t) a->n - 1;
  req.cmd = a->rest + 1;
  r = (Runtime__V1__ExecSyncResponse *) RT ("ExecSync", req, runtime__v1__exec_sync_response__descriptor);
  fwrite (r->stdout.data, 1, r->stdout.len, stdout);
  fwrite (r->stderr.data, 1, r->stderr.len, stderr);
  fflush (stdout);
  if (r->exit_code)
    fprintf (stderr, "command terminated with exit code %d\n", r->exit_code);
  exit (r->exit_code);
}

static void
verb_checkpoint (struct args *a)
{
  Runtime__V1__CheckpointContainerRequest req = RUNTIME__V1__CHECKPOINT_CONTAINER_REQUEST__INIT;

  need (a, 1, "checkpoint --export=PATH CID");
  if (a->export_path == NULL)
    die ("%s", "checkpoint: --export=PATH is required");
  req.container_id = a->rest[0];
  req.location = (char *) a->export_path;
  req.timeout = timeout_ms / 1000;
  timeout_ms += 10000;
  RT ("CheckpointContainer", req, runtime__v1__checkpoint_container_response__descriptor);
  puts (a->rest[0]);
}

static const struct
{
  const char *name;
  void (*fn) (struct args *);
} verbs[] = {
  { "version", verb_version }, { "runp", verb_runp },
  { "create", verb_create },   { "start", verb_each },
  { "stop", verb_each },       { "rm", verb_each },
  { "stopp", verb_each },      { "rmp", verb_each },
  { "ps", verb_ps },           { "pods", verb_pods },
  { "inspect", verb_inspect }, { "inspectp", verb_inspectp },
  { "exec", verb_exec },       { "checkpoint", verb_checkpoint },
  { "update", verb_update },
};

static long
duration_ms (const char *text)
{
  char *end;
  double v = strtod (text, &end);

  if (end == text || v < 0)
    die ("timeout `%s`: want N, Ns, Nms or Nm", text);
  if (!strcmp (end, "ms"))
    return (long) v;
  if (!strcmp (end, "m"))
    return (long) (v * 60000);
  if (*end == '\0' || !strcmp (end, "s"))
    return (long) (v * 1000);
  die ("timeout `%s`: want N, Ns, Nms or Nm", text);
  return 0;
}

int
main (int argc, char **argv)
{
  struct args a;
  grpc_channel_credentials *creds;
  int i = 1;

  for (; i + 1 < argc && argv[i][0] == '-'; i += 2)
    if (!strcmp (argv[i], "-r") || !strcmp (argv[i], "--runtime-endpoint"))
      endpoint = argv[i + 1];
    else if (!strcmp (argv[i], "-t") || !strcmp (argv[i], "--timeout"))
      timeout_ms = duration_ms (argv[i + 1]);
    else if (strcmp (argv[i], "-i") && strcmp (argv[i], "--image-endpoint"))
      die ("unknown option %s", argv[i]);
  if (i >= argc)
    die ("%s", "usage: cri_cli [-r unix://SOCK] [-t 30s] VERB ARGS...");
  if (strncmp (endpoint, "unix://", 7))
    die ("endpoint `%s`: only unix:// sockets", endpoint);
  for (size_t v = 0; v < sizeof verbs / sizeof verbs[0]; v++)
    if (!strcmp (argv[i], verbs[v].name))
      {
        char target[4096];
        grpc_init ();
        creds = grpc_insecure_credentials_create ();
        snprintf (target, sizeof target, "unix:%s", endpoint + 7);
        channel = grpc_channel_create (target, creds, NULL);
        parse_args (argc - i, argv + i, &a);
        /* rest[0] is the verb: verb_each reads it at rest[-1]. */
        a.rest++;
        a.n--;
        verbs[v].fn (&a);
        return 0;
      }
  die ("unknown verb %s", argv[i]);
  return 1;
}
