import { useState } from "react";
import { Button } from "@/components/ui/button";
import { Input } from "@/components/ui/input";
import { Check, Pencil, Plus, Trash2 } from "lucide-react";

// The user's documents (the Documents command): each with its pages and passages, and buttons to use it in this
// chat, rename it in place or delete it. Every change goes to the server as an action; the list comes back redrawn.
export default function Library() {
  const [renaming, setRenaming] = useState(null);
  const [name, setName] = useState("");
  const act = (action, payload) => callAction({ name: action, payload: { ...payload, message: props.message } });
  const labels = props.labels;
  const save = (id) => {
    if (name.trim()) act(props.actions.rename, { id, name: name.trim() });
    setRenaming(null);
  };
  return (
    <div className="flex flex-col gap-1 text-sm" data-testid="library">
      {props.documents.length === 0 && <span className="text-muted-foreground">{labels.none}</span>}
      {props.documents.map((doc) => (
        <div key={doc.id} className="flex flex-wrap items-center gap-1" data-testid="library-document">
          {renaming === doc.id ? (
            <form
              className="flex items-center gap-1"
              onSubmit={(event) => {
                event.preventDefault();
                save(doc.id);
              }}
            >
              <Input
                className="h-7 w-64"
                value={name}
                autoFocus
                aria-label={labels.rename}
                data-testid="document-name"
                onChange={(event) => setName(event.target.value)}
              />
              <Button type="submit" variant="ghost" size="icon" className="h-7 w-7" title={labels.save}>
                <Check className="h-4 w-4" />
              </Button>
            </form>
          ) : (
            <span className="font-medium" data-testid="document-title">
              {doc.name}
            </span>
          )}
          <span className="text-xs text-muted-foreground">{doc.line}</span>
          {doc.here ? (
            <span className="text-xs text-muted-foreground" data-testid="document-here">
              · {labels.here}
            </span>
          ) : (
            <Button
              variant="outline"
              size="sm"
              className="h-6 gap-1 px-1.5 text-xs"
              data-testid="use-document"
              onClick={() => act(props.actions.use, { id: doc.id })}
            >
              <Plus className="h-3.5 w-3.5" />
              {labels.use}
            </Button>
          )}
          <Button
            variant="ghost"
            size="icon"
            className="h-6 w-6"
            title={labels.rename}
            aria-label={labels.rename}
            data-testid="rename-document"
            onClick={() => {
              setRenaming(doc.id);
              setName(doc.name);
            }}
          >
            <Pencil className="h-3.5 w-3.5" />
          </Button>
          <Button
            variant="ghost"
            size="icon"
            className="h-6 w-6"
            title={labels.delete}
            aria-label={labels.delete}
            data-testid="delete-document"
            onClick={() => act(props.actions.delete, { id: doc.id })}
          >
            <Trash2 className="h-3.5 w-3.5" />
          </Button>
        </div>
      ))}
    </div>
  );
}
