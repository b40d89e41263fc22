{{/*
A value as the string it was written as. `--set image.tag=7874208` (a short
commit hash of digits alone) gives a number, and a values file, or the
values `helm upgrade --reuse-values` takes from the release, a float64 that
toString writes 7.874208e+06: a whole float64 is written as the integer it
is. Role IDs and secret IDs may be digits alone too.
*/}}
{{- define "minion-vault-operator.string" -}}
{{- $v := . -}}
{{- if and (kindIs "float64" $v) (eq $v (float64 (int64 $v))) -}}
{{- $v = int64 $v -}}
{{- end -}}
{{- toString $v -}}
{{- end -}}

{{/*
The manager's image: repository@digest when a digest is set (it pins the
image whatever the tag says), repository:tag otherwise, the tag as written
(minion-vault-operator.string).
*/}}
{{- define "minion-vault-operator.image" -}}
{{- $img := .Values.image -}}
{{- if not $img.repository -}}
{{- fail "image.repository must be set" -}}
{{- end -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else if $img.tag -}}
{{- printf "%s:%s" $img.repository (include "minion-vault-operator.string" $img.tag) -}}
{{- else -}}
{{- fail "image.tag or image.digest must be set" -}}
{{- end -}}
{{- end -}}

{{/*
The labels config/default gives every object (the generated templates carry
them as kustomize wrote them); the hand-written templates use the same.
*/}}
{{- define "minion-vault-operator.labels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/name: minion-vault-operator
app.kubernetes.io/part-of: minion-vault-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The Secret that holds a credential given as a value (a token, a secret ID),
in the operator's namespace, where it reads Secrets: dict with root (the
top context), name, key and value.
*/}}
{{- define "minion-vault-operator.credentialSecret" -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .name }}
  namespace: {{ .root.Values.namespace.name }}
  labels:
    {{- include "minion-vault-operator.labels" .root | nindent 4 }}
type: Opaque
stringData:
  {{ .key }}: {{ include "minion-vault-operator.string" .value | quote }}
{{- end -}}
