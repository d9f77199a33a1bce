BEGIN TRANSACTION;
CREATE TABLE datapoints_1440p_60s_0 (
  id INTEGER PRIMARY KEY,  -- window * 2^32 + metric key * 2 (sealed chunk); + 2^62 (open chunk); + 1 (open tail)
  newest INTEGER NOT NULL,  -- >= every timestamp of the row (expiry)
  points BLOB NOT NULL  -- chunk: biggraphite_like.chunks; tail: (timestamp uint32, value float64) records, little-endian
);
CREATE TABLE directories (
  key INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  parent INTEGER NOT NULL,
  component_0 INTEGER,
  component_1 INTEGER,
  component_2 INTEGER,
  component_3 INTEGER,
  component_4 INTEGER,
  component_5 INTEGER,
  component_6 INTEGER,
  component_7 INTEGER,
  component_8 INTEGER,
  component_9 INTEGER,
  component_10 INTEGER,
  component_11 INTEGER,
  component_12 INTEGER,
  component_13 INTEGER,
  component_14 INTEGER,
  component_15 INTEGER,
  component_16 INTEGER,
  component_17 INTEGER,
  component_18 INTEGER,
  component_19 INTEGER,
  component_20 INTEGER,
  component_21 INTEGER,
  component_22 INTEGER,
  component_23 INTEGER,
  component_24 INTEGER,
  component_25 INTEGER,
  component_26 INTEGER,
  component_27 INTEGER,
  component_28 INTEGER,
  component_29 INTEGER,
  component_30 INTEGER,
  component_31 INTEGER,
  component_32 INTEGER,
  component_33 INTEGER,
  component_34 INTEGER,
  component_35 INTEGER,
  component_36 INTEGER,
  component_37 INTEGER,
  component_38 INTEGER,
  component_39 INTEGER,
  component_40 INTEGER,
  component_41 INTEGER,
  component_42 INTEGER,
  component_43 INTEGER,
  component_44 INTEGER,
  component_45 INTEGER,
  component_46 INTEGER,
  component_47 INTEGER,
  component_48 INTEGER,
  component_49 INTEGER,
  component_50 INTEGER,
  component_51 INTEGER,
  component_52 INTEGER,
  component_53 INTEGER,
  component_54 INTEGER,
  component_55 INTEGER,
  component_56 INTEGER,
  component_57 INTEGER,
  component_58 INTEGER,
  component_59 INTEGER,
  component_60 INTEGER,
  component_61 INTEGER,
  component_62 INTEGER,
  component_63 INTEGER
);
CREATE TABLE metrics (
  key INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  parent INTEGER NOT NULL,
  component_0 INTEGER,
  component_1 INTEGER,
  component_2 INTEGER,
  component_3 INTEGER,
  component_4 INTEGER,
  component_5 INTEGER,
  component_6 INTEGER,
  component_7 INTEGER,
  component_8 INTEGER,
  component_9 INTEGER,
  component_10 INTEGER,
  component_11 INTEGER,
  component_12 INTEGER,
  component_13 INTEGER,
  component_14 INTEGER,
  component_15 INTEGER,
  component_16 INTEGER,
  component_17 INTEGER,
  component_18 INTEGER,
  component_19 INTEGER,
  component_20 INTEGER,
  component_21 INTEGER,
  component_22 INTEGER,
  component_23 INTEGER,
  component_24 INTEGER,
  component_25 INTEGER,
  component_26 INTEGER,
  component_27 INTEGER,
  component_28 INTEGER,
  component_29 INTEGER,
  component_30 INTEGER,
  component_31 INTEGER,
  component_32 INTEGER,
  component_33 INTEGER,
  component_34 INTEGER,
  component_35 INTEGER,
  component_36 INTEGER,
  component_37 INTEGER,
  component_38 INTEGER,
  component_39 INTEGER,
  component_40 INTEGER,
  component_41 INTEGER,
  component_42 INTEGER,
  component_43 INTEGER,
  component_44 INTEGER,
  component_45 INTEGER,
  component_46 INTEGER,
  component_47 INTEGER,
  component_48 INTEGER,
  component_49 INTEGER,
  component_50 INTEGER,
  component_51 INTEGER,
  component_52 INTEGER,
  component_53 INTEGER,
  component_54 INTEGER,
  component_55 INTEGER,
  component_56 INTEGER,
  component_57 INTEGER,
  component_58 INTEGER,
  component_59 INTEGER,
  component_60 INTEGER,
  component_61 INTEGER,
  component_62 INTEGER,
  component_63 INTEGER,
  retention TEXT NOT NULL,
  aggregator TEXT NOT NULL,
  xfilesfactor REAL NOT NULL,
  created_on INTEGER NOT NULL DEFAULT 0,
  updated_on INTEGER NOT NULL DEFAULT 0,
  read_on INTEGER NOT NULL DEFAULT 0
);
INSERT INTO "metrics" VALUES(1,'cpu;core=0;dc=eu;host=db0;rack=r0',1,8,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'1440*60s','average',0.5,1700000000,1700000000,0);
INSERT INTO "metrics" VALUES(2,'cpu;core=1;dc=us;host=web1;rack=r1',1,11,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'1440*60s','average',0.5,1700000000,1700000000,0);
INSERT INTO "metrics" VALUES(3,'cpu;core=2;dc=us;host=db2;rack=r2',1,3,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'1440*60s','average',0.5,1700000000,1700000000,0);
INSERT INTO "metrics" VALUES(4,'cpu;core=3;dc=eu;host=web3;rack=r3',1,10,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'1440*60s','average',0.5,1700000000,1700000000,0);
INSERT INTO "metrics" VALUES(5,'cpu;core=0;dc=us;host=db4;rack=r4',1,4,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'1440*60s','average',0.5,1700000000,1700000000,0);
INSERT INTO "metrics" VALUES(6,'cpu;core=1;dc=us;host=web5;rack=r5',1,6,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'1440*60s','average',0.5,1700000000,1700000000,0);
INSERT INTO "metrics" VALUES(7,'cpu;core=2;dc=eu;host=db6;rack=r6',1,5,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'1440*60s','average',0.5,1700000000,1700000000,0);
INSERT INTO "metrics" VALUES(8,'cpu;core=3;dc=us;host=web0;rack=r7',1,9,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'1440*60s','average',0.5,1700000000,1700000000,0);
INSERT INTO "metrics" VALUES(9,'cpu;core=0;dc=us;host=db1;rack=r8',1,2,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'1440*60s','average',0.5,1700000000,1700000000,0);
INSERT INTO "metrics" VALUES(10,'cpu;core=1;dc=eu;host=web2;rack=r9',1,7,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'1440*60s','average',0.5,1700000000,1700000000,0);
CREATE TABLE name_strings (
  id INTEGER PRIMARY KEY,
  value TEXT NOT NULL UNIQUE
);
INSERT INTO "name_strings" VALUES(0,'__END__');
INSERT INTO "name_strings" VALUES(1,'');
INSERT INTO "name_strings" VALUES(2,'cpu;core=0;dc=us;host=db1;rack=r8');
INSERT INTO "name_strings" VALUES(3,'cpu;core=2;dc=us;host=db2;rack=r2');
INSERT INTO "name_strings" VALUES(4,'cpu;core=0;dc=us;host=db4;rack=r4');
INSERT INTO "name_strings" VALUES(5,'cpu;core=2;dc=eu;host=db6;rack=r6');
INSERT INTO "name_strings" VALUES(6,'cpu;core=1;dc=us;host=web5;rack=r5');
INSERT INTO "name_strings" VALUES(7,'cpu;core=1;dc=eu;host=web2;rack=r9');
INSERT INTO "name_strings" VALUES(8,'cpu;core=0;dc=eu;host=db0;rack=r0');
INSERT INTO "name_strings" VALUES(9,'cpu;core=3;dc=us;host=web0;rack=r7');
INSERT INTO "name_strings" VALUES(10,'cpu;core=3;dc=eu;host=web3;rack=r3');
INSERT INTO "name_strings" VALUES(11,'cpu;core=1;dc=us;host=web1;rack=r1');
CREATE TABLE point_windows (
  stage_table TEXT PRIMARY KEY,
  window_slots INTEGER NOT NULL
);
INSERT INTO "point_windows" VALUES('datapoints_1440p_60s_0',720);
CREATE TABLE store_state (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT INTO "store_state" VALUES('deletions',0);
INSERT INTO "store_state" VALUES('points',0);
INSERT INTO "store_state" VALUES('directory_deletions',0);
CREATE TABLE tag_names (
  id INTEGER PRIMARY KEY,
  tag TEXT NOT NULL UNIQUE,
  series INTEGER NOT NULL DEFAULT 0
);
INSERT INTO "tag_names" VALUES(1,'name',78);
INSERT INTO "tag_names" VALUES(2,'core',59);
INSERT INTO "tag_names" VALUES(3,'dc',78);
INSERT INTO "tag_names" VALUES(4,'host',78);
INSERT INTO "tag_names" VALUES(5,'rack',78);
CREATE TABLE tag_postings (
  chunk INTEGER NOT NULL,
  value_id INTEGER NOT NULL,
  series_id INTEGER NOT NULL,
  PRIMARY KEY (chunk, value_id, series_id)
) WITHOUT ROWID;
INSERT INTO "tag_postings" VALUES(0,1,1);
INSERT INTO "tag_postings" VALUES(0,1,2);
INSERT INTO "tag_postings" VALUES(0,1,3);
INSERT INTO "tag_postings" VALUES(0,1,4);
INSERT INTO "tag_postings" VALUES(0,1,5);
INSERT INTO "tag_postings" VALUES(0,1,6);
INSERT INTO "tag_postings" VALUES(0,1,7);
INSERT INTO "tag_postings" VALUES(0,1,8);
INSERT INTO "tag_postings" VALUES(0,1,9);
INSERT INTO "tag_postings" VALUES(0,1,10);
INSERT INTO "tag_postings" VALUES(0,1,11);
INSERT INTO "tag_postings" VALUES(0,1,13);
INSERT INTO "tag_postings" VALUES(0,1,14);
INSERT INTO "tag_postings" VALUES(0,1,15);
INSERT INTO "tag_postings" VALUES(0,1,16);
INSERT INTO "tag_postings" VALUES(0,1,17);
INSERT INTO "tag_postings" VALUES(0,1,18);
INSERT INTO "tag_postings" VALUES(0,1,19);
INSERT INTO "tag_postings" VALUES(0,1,20);
INSERT INTO "tag_postings" VALUES(0,1,21);
INSERT INTO "tag_postings" VALUES(0,1,22);
INSERT INTO "tag_postings" VALUES(0,1,23);
INSERT INTO "tag_postings" VALUES(0,1,24);
INSERT INTO "tag_postings" VALUES(0,1,25);
INSERT INTO "tag_postings" VALUES(0,1,26);
INSERT INTO "tag_postings" VALUES(0,1,27);
INSERT INTO "tag_postings" VALUES(0,1,28);
INSERT INTO "tag_postings" VALUES(0,1,29);
INSERT INTO "tag_postings" VALUES(0,1,30);
INSERT INTO "tag_postings" VALUES(0,1,31);
INSERT INTO "tag_postings" VALUES(0,1,32);
INSERT INTO "tag_postings" VALUES(0,1,33);
INSERT INTO "tag_postings" VALUES(0,1,34);
INSERT INTO "tag_postings" VALUES(0,1,35);
INSERT INTO "tag_postings" VALUES(0,1,36);
INSERT INTO "tag_postings" VALUES(0,1,37);
INSERT INTO "tag_postings" VALUES(0,1,38);
INSERT INTO "tag_postings" VALUES(0,1,39);
INSERT INTO "tag_postings" VALUES(0,1,40);
INSERT INTO "tag_postings" VALUES(0,1,41);
INSERT INTO "tag_postings" VALUES(0,1,42);
INSERT INTO "tag_postings" VALUES(0,1,43);
INSERT INTO "tag_postings" VALUES(0,1,44);
INSERT INTO "tag_postings" VALUES(0,1,45);
INSERT INTO "tag_postings" VALUES(0,1,46);
INSERT INTO "tag_postings" VALUES(0,1,47);
INSERT INTO "tag_postings" VALUES(0,1,48);
INSERT INTO "tag_postings" VALUES(0,1,49);
INSERT INTO "tag_postings" VALUES(0,1,50);
INSERT INTO "tag_postings" VALUES(0,1,51);
INSERT INTO "tag_postings" VALUES(0,1,52);
INSERT INTO "tag_postings" VALUES(0,1,53);
INSERT INTO "tag_postings" VALUES(0,1,54);
INSERT INTO "tag_postings" VALUES(0,1,55);
INSERT INTO "tag_postings" VALUES(0,1,56);
INSERT INTO "tag_postings" VALUES(0,1,57);
INSERT INTO "tag_postings" VALUES(0,1,58);
INSERT INTO "tag_postings" VALUES(0,1,59);
INSERT INTO "tag_postings" VALUES(0,1,60);
INSERT INTO "tag_postings" VALUES(0,2,1);
INSERT INTO "tag_postings" VALUES(0,2,5);
INSERT INTO "tag_postings" VALUES(0,2,9);
INSERT INTO "tag_postings" VALUES(0,2,13);
INSERT INTO "tag_postings" VALUES(0,2,17);
INSERT INTO "tag_postings" VALUES(0,2,21);
INSERT INTO "tag_postings" VALUES(0,2,25);
INSERT INTO "tag_postings" VALUES(0,2,29);
INSERT INTO "tag_postings" VALUES(0,2,33);
INSERT INTO "tag_postings" VALUES(0,2,37);
INSERT INTO "tag_postings" VALUES(0,2,41);
INSERT INTO "tag_postings" VALUES(0,2,45);
INSERT INTO "tag_postings" VALUES(0,2,49);
INSERT INTO "tag_postings" VALUES(0,2,53);
INSERT INTO "tag_postings" VALUES(0,2,57);
INSERT INTO "tag_postings" VALUES(0,3,1);
INSERT INTO "tag_postings" VALUES(0,3,4);
INSERT INTO "tag_postings" VALUES(0,3,7);
INSERT INTO "tag_postings" VALUES(0,3,10);
INSERT INTO "tag_postings" VALUES(0,3,13);
INSERT INTO "tag_postings" VALUES(0,3,16);
INSERT INTO "tag_postings" VALUES(0,3,19);
INSERT INTO "tag_postings" VALUES(0,3,22);
INSERT INTO "tag_postings" VALUES(0,3,25);
INSERT INTO "tag_postings" VALUES(0,3,28);
INSERT INTO "tag_postings" VALUES(0,3,31);
INSERT INTO "tag_postings" VALUES(0,3,34);
INSERT INTO "tag_postings" VALUES(0,3,37);
INSERT INTO "tag_postings" VALUES(0,3,40);
INSERT INTO "tag_postings" VALUES(0,3,43);
INSERT INTO "tag_postings" VALUES(0,3,46);
INSERT INTO "tag_postings" VALUES(0,3,49);
INSERT INTO "tag_postings" VALUES(0,3,52);
INSERT INTO "tag_postings" VALUES(0,3,55);
INSERT INTO "tag_postings" VALUES(0,3,58);
INSERT INTO "tag_postings" VALUES(0,4,1);
INSERT INTO "tag_postings" VALUES(0,4,15);
INSERT INTO "tag_postings" VALUES(0,4,29);
INSERT INTO "tag_postings" VALUES(0,4,43);
INSERT INTO "tag_postings" VALUES(0,4,57);
INSERT INTO "tag_postings" VALUES(0,5,1);
INSERT INTO "tag_postings" VALUES(0,5,61);
INSERT INTO "tag_postings" VALUES(0,6,2);
INSERT INTO "tag_postings" VALUES(0,6,6);
INSERT INTO "tag_postings" VALUES(0,6,10);
INSERT INTO "tag_postings" VALUES(0,6,14);
INSERT INTO "tag_postings" VALUES(0,6,18);
INSERT INTO "tag_postings" VALUES(0,6,22);
INSERT INTO "tag_postings" VALUES(0,6,26);
INSERT INTO "tag_postings" VALUES(0,6,30);
INSERT INTO "tag_postings" VALUES(0,6,34);
INSERT INTO "tag_postings" VALUES(0,6,38);
INSERT INTO "tag_postings" VALUES(0,6,42);
INSERT INTO "tag_postings" VALUES(0,6,46);
INSERT INTO "tag_postings" VALUES(0,6,50);
INSERT INTO "tag_postings" VALUES(0,6,54);
INSERT INTO "tag_postings" VALUES(0,6,58);
INSERT INTO "tag_postings" VALUES(0,7,2);
INSERT INTO "tag_postings" VALUES(0,7,3);
INSERT INTO "tag_postings" VALUES(0,7,5);
INSERT INTO "tag_postings" VALUES(0,7,6);
INSERT INTO "tag_postings" VALUES(0,7,8);
INSERT INTO "tag_postings" VALUES(0,7,9);
INSERT INTO "tag_postings" VALUES(0,7,11);
INSERT INTO "tag_postings" VALUES(0,7,14);
INSERT INTO "tag_postings" VALUES(0,7,15);
INSERT INTO "tag_postings" VALUES(0,7,17);
INSERT INTO "tag_postings" VALUES(0,7,18);
INSERT INTO "tag_postings" VALUES(0,7,20);
INSERT INTO "tag_postings" VALUES(0,7,21);
INSERT INTO "tag_postings" VALUES(0,7,23);
INSERT INTO "tag_postings" VALUES(0,7,24);
INSERT INTO "tag_postings" VALUES(0,7,26);
INSERT INTO "tag_postings" VALUES(0,7,27);
INSERT INTO "tag_postings" VALUES(0,7,29);
INSERT INTO "tag_postings" VALUES(0,7,30);
INSERT INTO "tag_postings" VALUES(0,7,32);
INSERT INTO "tag_postings" VALUES(0,7,33);
INSERT INTO "tag_postings" VALUES(0,7,35);
INSERT INTO "tag_postings" VALUES(0,7,36);
INSERT INTO "tag_postings" VALUES(0,7,38);
INSERT INTO "tag_postings" VALUES(0,7,39);
INSERT INTO "tag_postings" VALUES(0,7,41);
INSERT INTO "tag_postings" VALUES(0,7,42);
INSERT INTO "tag_postings" VALUES(0,7,44);
INSERT INTO "tag_postings" VALUES(0,7,45);
INSERT INTO "tag_postings" VALUES(0,7,47);
INSERT INTO "tag_postings" VALUES(0,7,48);
INSERT INTO "tag_postings" VALUES(0,7,50);
INSERT INTO "tag_postings" VALUES(0,7,51);
INSERT INTO "tag_postings" VALUES(0,7,53);
INSERT INTO "tag_postings" VALUES(0,7,54);
INSERT INTO "tag_postings" VALUES(0,7,56);
INSERT INTO "tag_postings" VALUES(0,7,57);
INSERT INTO "tag_postings" VALUES(0,7,59);
INSERT INTO "tag_postings" VALUES(0,7,60);
INSERT INTO "tag_postings" VALUES(0,7,61);
INSERT INTO "tag_postings" VALUES(0,7,62);
INSERT INTO "tag_postings" VALUES(0,7,63);
INSERT INTO "tag_postings" VALUES(0,7,64);
INSERT INTO "tag_postings" VALUES(0,7,65);
INSERT INTO "tag_postings" VALUES(0,7,67);
INSERT INTO "tag_postings" VALUES(0,7,68);
INSERT INTO "tag_postings" VALUES(0,7,69);
INSERT INTO "tag_postings" VALUES(0,7,70);
INSERT INTO "tag_postings" VALUES(0,7,71);
INSERT INTO "tag_postings" VALUES(0,7,72);
INSERT INTO "tag_postings" VALUES(0,7,73);
INSERT INTO "tag_postings" VALUES(0,7,74);
INSERT INTO "tag_postings" VALUES(0,7,75);
INSERT INTO "tag_postings" VALUES(0,7,76);
INSERT INTO "tag_postings" VALUES(0,7,77);
INSERT INTO "tag_postings" VALUES(0,7,78);
INSERT INTO "tag_postings" VALUES(0,7,79);
INSERT INTO "tag_postings" VALUES(0,7,80);
INSERT INTO "tag_postings" VALUES(0,8,2);
INSERT INTO "tag_postings" VALUES(0,8,16);
INSERT INTO "tag_postings" VALUES(0,8,30);
INSERT INTO "tag_postings" VALUES(0,8,44);
INSERT INTO "tag_postings" VALUES(0,8,58);
INSERT INTO "tag_postings" VALUES(0,8,62);
INSERT INTO "tag_postings" VALUES(0,9,2);
INSERT INTO "tag_postings" VALUES(0,9,62);
INSERT INTO "tag_postings" VALUES(0,10,3);
INSERT INTO "tag_postings" VALUES(0,10,7);
INSERT INTO "tag_postings" VALUES(0,10,11);
INSERT INTO "tag_postings" VALUES(0,10,15);
INSERT INTO "tag_postings" VALUES(0,10,19);
INSERT INTO "tag_postings" VALUES(0,10,23);
INSERT INTO "tag_postings" VALUES(0,10,27);
INSERT INTO "tag_postings" VALUES(0,10,31);
INSERT INTO "tag_postings" VALUES(0,10,35);
INSERT INTO "tag_postings" VALUES(0,10,39);
INSERT INTO "tag_postings" VALUES(0,10,43);
INSERT INTO "tag_postings" VALUES(0,10,47);
INSERT INTO "tag_postings" VALUES(0,10,51);
INSERT INTO "tag_postings" VALUES(0,10,55);
INSERT INTO "tag_postings" VALUES(0,10,59);
INSERT INTO "tag_postings" VALUES(0,11,3);
INSERT INTO "tag_postings" VALUES(0,11,17);
INSERT INTO "tag_postings" VALUES(0,11,31);
INSERT INTO "tag_postings" VALUES(0,11,45);
INSERT INTO "tag_postings" VALUES(0,11,59);
INSERT INTO "tag_postings" VALUES(0,12,3);
INSERT INTO "tag_postings" VALUES(0,12,63);
INSERT INTO "tag_postings" VALUES(0,13,4);
INSERT INTO "tag_postings" VALUES(0,13,8);
INSERT INTO "tag_postings" VALUES(0,13,16);
INSERT INTO "tag_postings" VALUES(0,13,20);
INSERT INTO "tag_postings" VALUES(0,13,24);
INSERT INTO "tag_postings" VALUES(0,13,28);
INSERT INTO "tag_postings" VALUES(0,13,32);
INSERT INTO "tag_postings" VALUES(0,13,36);
INSERT INTO "tag_postings" VALUES(0,13,40);
INSERT INTO "tag_postings" VALUES(0,13,44);
INSERT INTO "tag_postings" VALUES(0,13,48);
INSERT INTO "tag_postings" VALUES(0,13,52);
INSERT INTO "tag_postings" VALUES(0,13,56);
INSERT INTO "tag_postings" VALUES(0,13,60);
INSERT INTO "tag_postings" VALUES(0,14,4);
INSERT INTO "tag_postings" VALUES(0,14,18);
INSERT INTO "tag_postings" VALUES(0,14,32);
INSERT INTO "tag_postings" VALUES(0,14,46);
INSERT INTO "tag_postings" VALUES(0,14,60);
INSERT INTO "tag_postings" VALUES(0,14,64);
INSERT INTO "tag_postings" VALUES(0,15,4);
INSERT INTO "tag_postings" VALUES(0,15,64);
INSERT INTO "tag_postings" VALUES(0,16,5);
INSERT INTO "tag_postings" VALUES(0,16,19);
INSERT INTO "tag_postings" VALUES(0,16,33);
INSERT INTO "tag_postings" VALUES(0,16,47);
INSERT INTO "tag_postings" VALUES(0,17,5);
INSERT INTO "tag_postings" VALUES(0,17,65);
INSERT INTO "tag_postings" VALUES(0,18,6);
INSERT INTO "tag_postings" VALUES(0,18,20);
INSERT INTO "tag_postings" VALUES(0,18,34);
INSERT INTO "tag_postings" VALUES(0,18,48);
INSERT INTO "tag_postings" VALUES(0,19,6);
INSERT INTO "tag_postings" VALUES(0,20,7);
INSERT INTO "tag_postings" VALUES(0,20,21);
INSERT INTO "tag_postings" VALUES(0,20,35);
INSERT INTO "tag_postings" VALUES(0,20,49);
INSERT INTO "tag_postings" VALUES(0,21,7);
INSERT INTO "tag_postings" VALUES(0,21,67);
INSERT INTO "tag_postings" VALUES(0,22,8);
INSERT INTO "tag_postings" VALUES(0,22,22);
INSERT INTO "tag_postings" VALUES(0,22,36);
INSERT INTO "tag_postings" VALUES(0,22,50);
INSERT INTO "tag_postings" VALUES(0,22,61);
INSERT INTO "tag_postings" VALUES(0,23,8);
INSERT INTO "tag_postings" VALUES(0,23,68);
INSERT INTO "tag_postings" VALUES(0,24,9);
INSERT INTO "tag_postings" VALUES(0,24,23);
INSERT INTO "tag_postings" VALUES(0,24,37);
INSERT INTO "tag_postings" VALUES(0,24,51);
INSERT INTO "tag_postings" VALUES(0,25,9);
INSERT INTO "tag_postings" VALUES(0,25,69);
INSERT INTO "tag_postings" VALUES(0,26,10);
INSERT INTO "tag_postings" VALUES(0,26,24);
INSERT INTO "tag_postings" VALUES(0,26,38);
INSERT INTO "tag_postings" VALUES(0,26,52);
INSERT INTO "tag_postings" VALUES(0,26,63);
INSERT INTO "tag_postings" VALUES(0,27,10);
INSERT INTO "tag_postings" VALUES(0,27,70);
INSERT INTO "tag_postings" VALUES(0,28,11);
INSERT INTO "tag_postings" VALUES(0,28,25);
INSERT INTO "tag_postings" VALUES(0,28,39);
INSERT INTO "tag_postings" VALUES(0,28,53);
INSERT INTO "tag_postings" VALUES(0,29,11);
INSERT INTO "tag_postings" VALUES(0,29,71);
INSERT INTO "tag_postings" VALUES(0,30,26);
INSERT INTO "tag_postings" VALUES(0,30,40);
INSERT INTO "tag_postings" VALUES(0,30,54);
INSERT INTO "tag_postings" VALUES(0,30,65);
INSERT INTO "tag_postings" VALUES(0,31,72);
INSERT INTO "tag_postings" VALUES(0,32,13);
INSERT INTO "tag_postings" VALUES(0,32,27);
INSERT INTO "tag_postings" VALUES(0,32,41);
INSERT INTO "tag_postings" VALUES(0,32,55);
INSERT INTO "tag_postings" VALUES(0,33,13);
INSERT INTO "tag_postings" VALUES(0,33,73);
INSERT INTO "tag_postings" VALUES(0,34,14);
INSERT INTO "tag_postings" VALUES(0,34,28);
INSERT INTO "tag_postings" VALUES(0,34,42);
INSERT INTO "tag_postings" VALUES(0,34,56);
INSERT INTO "tag_postings" VALUES(0,34,67);
INSERT INTO "tag_postings" VALUES(0,35,14);
INSERT INTO "tag_postings" VALUES(0,35,74);
INSERT INTO "tag_postings" VALUES(0,36,15);
INSERT INTO "tag_postings" VALUES(0,36,75);
INSERT INTO "tag_postings" VALUES(0,37,16);
INSERT INTO "tag_postings" VALUES(0,37,76);
INSERT INTO "tag_postings" VALUES(0,38,17);
INSERT INTO "tag_postings" VALUES(0,38,77);
INSERT INTO "tag_postings" VALUES(0,39,18);
INSERT INTO "tag_postings" VALUES(0,39,78);
INSERT INTO "tag_postings" VALUES(0,40,19);
INSERT INTO "tag_postings" VALUES(0,40,79);
INSERT INTO "tag_postings" VALUES(0,41,20);
INSERT INTO "tag_postings" VALUES(0,41,80);
INSERT INTO "tag_postings" VALUES(0,42,21);
INSERT INTO "tag_postings" VALUES(0,43,22);
INSERT INTO "tag_postings" VALUES(0,44,23);
INSERT INTO "tag_postings" VALUES(0,45,24);
INSERT INTO "tag_postings" VALUES(0,46,25);
INSERT INTO "tag_postings" VALUES(0,47,26);
INSERT INTO "tag_postings" VALUES(0,48,27);
INSERT INTO "tag_postings" VALUES(0,49,28);
INSERT INTO "tag_postings" VALUES(0,50,29);
INSERT INTO "tag_postings" VALUES(0,51,30);
INSERT INTO "tag_postings" VALUES(0,52,31);
INSERT INTO "tag_postings" VALUES(0,53,32);
INSERT INTO "tag_postings" VALUES(0,54,33);
INSERT INTO "tag_postings" VALUES(0,55,34);
INSERT INTO "tag_postings" VALUES(0,56,35);
INSERT INTO "tag_postings" VALUES(0,57,36);
INSERT INTO "tag_postings" VALUES(0,58,37);
INSERT INTO "tag_postings" VALUES(0,59,38);
INSERT INTO "tag_postings" VALUES(0,60,39);
INSERT INTO "tag_postings" VALUES(0,61,40);
INSERT INTO "tag_postings" VALUES(0,62,41);
INSERT INTO "tag_postings" VALUES(0,63,42);
INSERT INTO "tag_postings" VALUES(0,64,43);
INSERT INTO "tag_postings" VALUES(0,65,44);
INSERT INTO "tag_postings" VALUES(0,66,45);
INSERT INTO "tag_postings" VALUES(0,67,46);
INSERT INTO "tag_postings" VALUES(0,68,47);
INSERT INTO "tag_postings" VALUES(0,69,48);
INSERT INTO "tag_postings" VALUES(0,70,49);
INSERT INTO "tag_postings" VALUES(0,71,50);
INSERT INTO "tag_postings" VALUES(0,72,51);
INSERT INTO "tag_postings" VALUES(0,73,52);
INSERT INTO "tag_postings" VALUES(0,74,53);
INSERT INTO "tag_postings" VALUES(0,75,54);
INSERT INTO "tag_postings" VALUES(0,76,55);
INSERT INTO "tag_postings" VALUES(0,77,56);
INSERT INTO "tag_postings" VALUES(0,78,57);
INSERT INTO "tag_postings" VALUES(0,79,58);
INSERT INTO "tag_postings" VALUES(0,80,59);
INSERT INTO "tag_postings" VALUES(0,81,60);
INSERT INTO "tag_postings" VALUES(0,82,61);
INSERT INTO "tag_postings" VALUES(0,82,62);
INSERT INTO "tag_postings" VALUES(0,82,63);
INSERT INTO "tag_postings" VALUES(0,82,64);
INSERT INTO "tag_postings" VALUES(0,82,65);
INSERT INTO "tag_postings" VALUES(0,82,67);
INSERT INTO "tag_postings" VALUES(0,82,68);
INSERT INTO "tag_postings" VALUES(0,82,69);
INSERT INTO "tag_postings" VALUES(0,82,70);
INSERT INTO "tag_postings" VALUES(0,82,71);
INSERT INTO "tag_postings" VALUES(0,82,72);
INSERT INTO "tag_postings" VALUES(0,82,73);
INSERT INTO "tag_postings" VALUES(0,82,74);
INSERT INTO "tag_postings" VALUES(0,82,75);
INSERT INTO "tag_postings" VALUES(0,82,76);
INSERT INTO "tag_postings" VALUES(0,82,77);
INSERT INTO "tag_postings" VALUES(0,82,78);
INSERT INTO "tag_postings" VALUES(0,82,79);
INSERT INTO "tag_postings" VALUES(0,82,80);
INSERT INTO "tag_postings" VALUES(0,83,68);
INSERT INTO "tag_postings" VALUES(0,84,69);
INSERT INTO "tag_postings" VALUES(0,85,70);
INSERT INTO "tag_postings" VALUES(0,86,71);
INSERT INTO "tag_postings" VALUES(0,87,72);
INSERT INTO "tag_postings" VALUES(0,88,73);
INSERT INTO "tag_postings" VALUES(0,89,74);
INSERT INTO "tag_postings" VALUES(0,90,75);
INSERT INTO "tag_postings" VALUES(0,91,76);
INSERT INTO "tag_postings" VALUES(0,92,77);
INSERT INTO "tag_postings" VALUES(0,93,78);
INSERT INTO "tag_postings" VALUES(0,94,79);
INSERT INTO "tag_postings" VALUES(0,95,80);
CREATE TABLE tag_values (
  id INTEGER PRIMARY KEY,
  tag_id INTEGER NOT NULL,
  value TEXT NOT NULL,
  series INTEGER NOT NULL DEFAULT 0,
  UNIQUE (tag_id, value)
);
INSERT INTO "tag_values" VALUES(1,1,'cpu',59);
INSERT INTO "tag_values" VALUES(2,2,'0',15);
INSERT INTO "tag_values" VALUES(3,3,'eu',20);
INSERT INTO "tag_values" VALUES(4,4,'db0',5);
INSERT INTO "tag_values" VALUES(5,5,'r0',2);
INSERT INTO "tag_values" VALUES(6,2,'1',15);
INSERT INTO "tag_values" VALUES(7,3,'us',58);
INSERT INTO "tag_values" VALUES(8,4,'web1',6);
INSERT INTO "tag_values" VALUES(9,5,'r1',2);
INSERT INTO "tag_values" VALUES(10,2,'2',15);
INSERT INTO "tag_values" VALUES(11,4,'db2',5);
INSERT INTO "tag_values" VALUES(12,5,'r2',2);
INSERT INTO "tag_values" VALUES(13,2,'3',14);
INSERT INTO "tag_values" VALUES(14,4,'web3',6);
INSERT INTO "tag_values" VALUES(15,5,'r3',2);
INSERT INTO "tag_values" VALUES(16,4,'db4',4);
INSERT INTO "tag_values" VALUES(17,5,'r4',2);
INSERT INTO "tag_values" VALUES(18,4,'web5',4);
INSERT INTO "tag_values" VALUES(19,5,'r5',1);
INSERT INTO "tag_values" VALUES(20,4,'db6',4);
INSERT INTO "tag_values" VALUES(21,5,'r6',2);
INSERT INTO "tag_values" VALUES(22,4,'web0',5);
INSERT INTO "tag_values" VALUES(23,5,'r7',2);
INSERT INTO "tag_values" VALUES(24,4,'db1',4);
INSERT INTO "tag_values" VALUES(25,5,'r8',2);
INSERT INTO "tag_values" VALUES(26,4,'web2',5);
INSERT INTO "tag_values" VALUES(27,5,'r9',2);
INSERT INTO "tag_values" VALUES(28,4,'db3',4);
INSERT INTO "tag_values" VALUES(29,5,'r10',2);
INSERT INTO "tag_values" VALUES(30,4,'web4',4);
INSERT INTO "tag_values" VALUES(31,5,'r11',1);
INSERT INTO "tag_values" VALUES(32,4,'db5',4);
INSERT INTO "tag_values" VALUES(33,5,'r12',2);
INSERT INTO "tag_values" VALUES(34,4,'web6',5);
INSERT INTO "tag_values" VALUES(35,5,'r13',2);
INSERT INTO "tag_values" VALUES(36,5,'r14',2);
INSERT INTO "tag_values" VALUES(37,5,'r15',2);
INSERT INTO "tag_values" VALUES(38,5,'r16',2);
INSERT INTO "tag_values" VALUES(39,5,'r17',2);
INSERT INTO "tag_values" VALUES(40,5,'r18',2);
INSERT INTO "tag_values" VALUES(41,5,'r19',2);
INSERT INTO "tag_values" VALUES(42,5,'r20',1);
INSERT INTO "tag_values" VALUES(43,5,'r21',1);
INSERT INTO "tag_values" VALUES(44,5,'r22',1);
INSERT INTO "tag_values" VALUES(45,5,'r23',1);
INSERT INTO "tag_values" VALUES(46,5,'r24',1);
INSERT INTO "tag_values" VALUES(47,5,'r25',1);
INSERT INTO "tag_values" VALUES(48,5,'r26',1);
INSERT INTO "tag_values" VALUES(49,5,'r27',1);
INSERT INTO "tag_values" VALUES(50,5,'r28',1);
INSERT INTO "tag_values" VALUES(51,5,'r29',1);
INSERT INTO "tag_values" VALUES(52,5,'r30',1);
INSERT INTO "tag_values" VALUES(53,5,'r31',1);
INSERT INTO "tag_values" VALUES(54,5,'r32',1);
INSERT INTO "tag_values" VALUES(55,5,'r33',1);
INSERT INTO "tag_values" VALUES(56,5,'r34',1);
INSERT INTO "tag_values" VALUES(57,5,'r35',1);
INSERT INTO "tag_values" VALUES(58,5,'r36',1);
INSERT INTO "tag_values" VALUES(59,5,'r37',1);
INSERT INTO "tag_values" VALUES(60,5,'r38',1);
INSERT INTO "tag_values" VALUES(61,5,'r39',1);
INSERT INTO "tag_values" VALUES(62,5,'r40',1);
INSERT INTO "tag_values" VALUES(63,5,'r41',1);
INSERT INTO "tag_values" VALUES(64,5,'r42',1);
INSERT INTO "tag_values" VALUES(65,5,'r43',1);
INSERT INTO "tag_values" VALUES(66,5,'r44',1);
INSERT INTO "tag_values" VALUES(67,5,'r45',1);
INSERT INTO "tag_values" VALUES(68,5,'r46',1);
INSERT INTO "tag_values" VALUES(69,5,'r47',1);
INSERT INTO "tag_values" VALUES(70,5,'r48',1);
INSERT INTO "tag_values" VALUES(71,5,'r49',1);
INSERT INTO "tag_values" VALUES(72,5,'r50',1);
INSERT INTO "tag_values" VALUES(73,5,'r51',1);
INSERT INTO "tag_values" VALUES(74,5,'r52',1);
INSERT INTO "tag_values" VALUES(75,5,'r53',1);
INSERT INTO "tag_values" VALUES(76,5,'r54',1);
INSERT INTO "tag_values" VALUES(77,5,'r55',1);
INSERT INTO "tag_values" VALUES(78,5,'r56',1);
INSERT INTO "tag_values" VALUES(79,5,'r57',1);
INSERT INTO "tag_values" VALUES(80,5,'r58',1);
INSERT INTO "tag_values" VALUES(81,5,'r59',1);
INSERT INTO "tag_values" VALUES(82,1,'disk.used',19);
INSERT INTO "tag_values" VALUES(83,4,'web7',1);
INSERT INTO "tag_values" VALUES(84,4,'web8',1);
INSERT INTO "tag_values" VALUES(85,4,'web9',1);
INSERT INTO "tag_values" VALUES(86,4,'web10',1);
INSERT INTO "tag_values" VALUES(87,4,'web11',1);
INSERT INTO "tag_values" VALUES(88,4,'web12',1);
INSERT INTO "tag_values" VALUES(89,4,'web13',1);
INSERT INTO "tag_values" VALUES(90,4,'web14',1);
INSERT INTO "tag_values" VALUES(91,4,'web15',1);
INSERT INTO "tag_values" VALUES(92,4,'web16',1);
INSERT INTO "tag_values" VALUES(93,4,'web17',1);
INSERT INTO "tag_values" VALUES(94,4,'web18',1);
INSERT INTO "tag_values" VALUES(95,4,'web19',1);
INSERT INTO "tag_values" VALUES(96,1,'gone',0);
CREATE TABLE tagged_series (
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL UNIQUE,
  updated_on INTEGER NOT NULL
);
INSERT INTO "tagged_series" VALUES(1,'cpu;core=0;dc=eu;host=db0;rack=r0',1700000000);
INSERT INTO "tagged_series" VALUES(2,'cpu;core=1;dc=us;host=web1;rack=r1',1700000000);
INSERT INTO "tagged_series" VALUES(3,'cpu;core=2;dc=us;host=db2;rack=r2',1700000000);
INSERT INTO "tagged_series" VALUES(4,'cpu;core=3;dc=eu;host=web3;rack=r3',1700000000);
INSERT INTO "tagged_series" VALUES(5,'cpu;core=0;dc=us;host=db4;rack=r4',1700000000);
INSERT INTO "tagged_series" VALUES(6,'cpu;core=1;dc=us;host=web5;rack=r5',1700000000);
INSERT INTO "tagged_series" VALUES(7,'cpu;core=2;dc=eu;host=db6;rack=r6',1700000000);
INSERT INTO "tagged_series" VALUES(8,'cpu;core=3;dc=us;host=web0;rack=r7',1700000000);
INSERT INTO "tagged_series" VALUES(9,'cpu;core=0;dc=us;host=db1;rack=r8',1700000000);
INSERT INTO "tagged_series" VALUES(10,'cpu;core=1;dc=eu;host=web2;rack=r9',1700000000);
INSERT INTO "tagged_series" VALUES(11,'cpu;core=2;dc=us;host=db3;rack=r10',1700000000);
INSERT INTO "tagged_series" VALUES(13,'cpu;core=0;dc=eu;host=db5;rack=r12',1700000000);
INSERT INTO "tagged_series" VALUES(14,'cpu;core=1;dc=us;host=web6;rack=r13',1700000000);
INSERT INTO "tagged_series" VALUES(15,'cpu;core=2;dc=us;host=db0;rack=r14',1700000000);
INSERT INTO "tagged_series" VALUES(16,'cpu;core=3;dc=eu;host=web1;rack=r15',1700000000);
INSERT INTO "tagged_series" VALUES(17,'cpu;core=0;dc=us;host=db2;rack=r16',1700000000);
INSERT INTO "tagged_series" VALUES(18,'cpu;core=1;dc=us;host=web3;rack=r17',1700000000);
INSERT INTO "tagged_series" VALUES(19,'cpu;core=2;dc=eu;host=db4;rack=r18',1700000000);
INSERT INTO "tagged_series" VALUES(20,'cpu;core=3;dc=us;host=web5;rack=r19',1700000000);
INSERT INTO "tagged_series" VALUES(21,'cpu;core=0;dc=us;host=db6;rack=r20',1700000000);
INSERT INTO "tagged_series" VALUES(22,'cpu;core=1;dc=eu;host=web0;rack=r21',1700000000);
INSERT INTO "tagged_series" VALUES(23,'cpu;core=2;dc=us;host=db1;rack=r22',1700000000);
INSERT INTO "tagged_series" VALUES(24,'cpu;core=3;dc=us;host=web2;rack=r23',1700000000);
INSERT INTO "tagged_series" VALUES(25,'cpu;core=0;dc=eu;host=db3;rack=r24',1700000000);
INSERT INTO "tagged_series" VALUES(26,'cpu;core=1;dc=us;host=web4;rack=r25',1700000000);
INSERT INTO "tagged_series" VALUES(27,'cpu;core=2;dc=us;host=db5;rack=r26',1700000000);
INSERT INTO "tagged_series" VALUES(28,'cpu;core=3;dc=eu;host=web6;rack=r27',1700000000);
INSERT INTO "tagged_series" VALUES(29,'cpu;core=0;dc=us;host=db0;rack=r28',1700000000);
INSERT INTO "tagged_series" VALUES(30,'cpu;core=1;dc=us;host=web1;rack=r29',1700000000);
INSERT INTO "tagged_series" VALUES(31,'cpu;core=2;dc=eu;host=db2;rack=r30',1700000000);
INSERT INTO "tagged_series" VALUES(32,'cpu;core=3;dc=us;host=web3;rack=r31',1700000000);
INSERT INTO "tagged_series" VALUES(33,'cpu;core=0;dc=us;host=db4;rack=r32',1700000000);
INSERT INTO "tagged_series" VALUES(34,'cpu;core=1;dc=eu;host=web5;rack=r33',1700000000);
INSERT INTO "tagged_series" VALUES(35,'cpu;core=2;dc=us;host=db6;rack=r34',1700000000);
INSERT INTO "tagged_series" VALUES(36,'cpu;core=3;dc=us;host=web0;rack=r35',1700000000);
INSERT INTO "tagged_series" VALUES(37,'cpu;core=0;dc=eu;host=db1;rack=r36',1700000000);
INSERT INTO "tagged_series" VALUES(38,'cpu;core=1;dc=us;host=web2;rack=r37',1700000000);
INSERT INTO "tagged_series" VALUES(39,'cpu;core=2;dc=us;host=db3;rack=r38',1700000000);
INSERT INTO "tagged_series" VALUES(40,'cpu;core=3;dc=eu;host=web4;rack=r39',1700000000);
INSERT INTO "tagged_series" VALUES(41,'cpu;core=0;dc=us;host=db5;rack=r40',1700000060);
INSERT INTO "tagged_series" VALUES(42,'cpu;core=1;dc=us;host=web6;rack=r41',1700000060);
INSERT INTO "tagged_series" VALUES(43,'cpu;core=2;dc=eu;host=db0;rack=r42',1700000060);
INSERT INTO "tagged_series" VALUES(44,'cpu;core=3;dc=us;host=web1;rack=r43',1700000060);
INSERT INTO "tagged_series" VALUES(45,'cpu;core=0;dc=us;host=db2;rack=r44',1700000060);
INSERT INTO "tagged_series" VALUES(46,'cpu;core=1;dc=eu;host=web3;rack=r45',1700000060);
INSERT INTO "tagged_series" VALUES(47,'cpu;core=2;dc=us;host=db4;rack=r46',1700000060);
INSERT INTO "tagged_series" VALUES(48,'cpu;core=3;dc=us;host=web5;rack=r47',1700000060);
INSERT INTO "tagged_series" VALUES(49,'cpu;core=0;dc=eu;host=db6;rack=r48',1700000060);
INSERT INTO "tagged_series" VALUES(50,'cpu;core=1;dc=us;host=web0;rack=r49',1700000060);
INSERT INTO "tagged_series" VALUES(51,'cpu;core=2;dc=us;host=db1;rack=r50',1700000060);
INSERT INTO "tagged_series" VALUES(52,'cpu;core=3;dc=eu;host=web2;rack=r51',1700000060);
INSERT INTO "tagged_series" VALUES(53,'cpu;core=0;dc=us;host=db3;rack=r52',1700000060);
INSERT INTO "tagged_series" VALUES(54,'cpu;core=1;dc=us;host=web4;rack=r53',1700000060);
INSERT INTO "tagged_series" VALUES(55,'cpu;core=2;dc=eu;host=db5;rack=r54',1700000060);
INSERT INTO "tagged_series" VALUES(56,'cpu;core=3;dc=us;host=web6;rack=r55',1700000060);
INSERT INTO "tagged_series" VALUES(57,'cpu;core=0;dc=us;host=db0;rack=r56',1700000060);
INSERT INTO "tagged_series" VALUES(58,'cpu;core=1;dc=eu;host=web1;rack=r57',1700000060);
INSERT INTO "tagged_series" VALUES(59,'cpu;core=2;dc=us;host=db2;rack=r58',1700000060);
INSERT INTO "tagged_series" VALUES(60,'cpu;core=3;dc=us;host=web3;rack=r59',1700000060);
INSERT INTO "tagged_series" VALUES(61,'disk.used;dc=us;host=web0;rack=r0',1700000060);
INSERT INTO "tagged_series" VALUES(62,'disk.used;dc=us;host=web1;rack=r1',1700000060);
INSERT INTO "tagged_series" VALUES(63,'disk.used;dc=us;host=web2;rack=r2',1700000060);
INSERT INTO "tagged_series" VALUES(64,'disk.used;dc=us;host=web3;rack=r3',1700000060);
INSERT INTO "tagged_series" VALUES(65,'disk.used;dc=us;host=web4;rack=r4',1700000060);
INSERT INTO "tagged_series" VALUES(67,'disk.used;dc=us;host=web6;rack=r6',1700000060);
INSERT INTO "tagged_series" VALUES(68,'disk.used;dc=us;host=web7;rack=r7',1700000060);
INSERT INTO "tagged_series" VALUES(69,'disk.used;dc=us;host=web8;rack=r8',1700000060);
INSERT INTO "tagged_series" VALUES(70,'disk.used;dc=us;host=web9;rack=r9',1700000060);
INSERT INTO "tagged_series" VALUES(71,'disk.used;dc=us;host=web10;rack=r10',1700000060);
INSERT INTO "tagged_series" VALUES(72,'disk.used;dc=us;host=web11;rack=r11',1700000060);
INSERT INTO "tagged_series" VALUES(73,'disk.used;dc=us;host=web12;rack=r12',1700000060);
INSERT INTO "tagged_series" VALUES(74,'disk.used;dc=us;host=web13;rack=r13',1700000060);
INSERT INTO "tagged_series" VALUES(75,'disk.used;dc=us;host=web14;rack=r14',1700000060);
INSERT INTO "tagged_series" VALUES(76,'disk.used;dc=us;host=web15;rack=r15',1700000060);
INSERT INTO "tagged_series" VALUES(77,'disk.used;dc=us;host=web16;rack=r16',1700000060);
INSERT INTO "tagged_series" VALUES(78,'disk.used;dc=us;host=web17;rack=r17',1700000060);
INSERT INTO "tagged_series" VALUES(79,'disk.used;dc=us;host=web18;rack=r18',1700000060);
INSERT INTO "tagged_series" VALUES(80,'disk.used;dc=us;host=web19;rack=r19',1700000060);
CREATE INDEX metrics_parent ON metrics (parent);
CREATE INDEX metrics_component_0 ON metrics (component_0) WHERE component_0 IS NOT NULL;
CREATE INDEX metrics_component_1 ON metrics (component_1) WHERE component_1 IS NOT NULL;
CREATE INDEX metrics_component_2 ON metrics (component_2) WHERE component_2 IS NOT NULL;
CREATE INDEX metrics_component_3 ON metrics (component_3) WHERE component_3 IS NOT NULL;
CREATE INDEX metrics_component_4 ON metrics (component_4) WHERE component_4 IS NOT NULL;
CREATE INDEX metrics_component_5 ON metrics (component_5) WHERE component_5 IS NOT NULL;
CREATE INDEX metrics_component_6 ON metrics (component_6) WHERE component_6 IS NOT NULL;
CREATE INDEX metrics_component_7 ON metrics (component_7) WHERE component_7 IS NOT NULL;
CREATE INDEX metrics_component_8 ON metrics (component_8) WHERE component_8 IS NOT NULL;
CREATE INDEX metrics_component_9 ON metrics (component_9) WHERE component_9 IS NOT NULL;
CREATE INDEX metrics_component_10 ON metrics (component_10) WHERE component_10 IS NOT NULL;
CREATE INDEX metrics_component_11 ON metrics (component_11) WHERE component_11 IS NOT NULL;
CREATE INDEX metrics_component_12 ON metrics (component_12) WHERE component_12 IS NOT NULL;
CREATE INDEX metrics_component_13 ON metrics (component_13) WHERE component_13 IS NOT NULL;
CREATE INDEX metrics_component_14 ON metrics (component_14) WHERE component_14 IS NOT NULL;
CREATE INDEX metrics_component_15 ON metrics (component_15) WHERE component_15 IS NOT NULL;
CREATE INDEX metrics_component_16 ON metrics (component_16) WHERE component_16 IS NOT NULL;
CREATE INDEX metrics_component_17 ON metrics (component_17) WHERE component_17 IS NOT NULL;
CREATE INDEX metrics_component_18 ON metrics (component_18) WHERE component_18 IS NOT NULL;
CREATE INDEX metrics_component_19 ON metrics (component_19) WHERE component_19 IS NOT NULL;
CREATE INDEX metrics_component_20 ON metrics (component_20) WHERE component_20 IS NOT NULL;
CREATE INDEX metrics_component_21 ON metrics (component_21) WHERE component_21 IS NOT NULL;
CREATE INDEX metrics_component_22 ON metrics (component_22) WHERE component_22 IS NOT NULL;
CREATE INDEX metrics_component_23 ON metrics (component_23) WHERE component_23 IS NOT NULL;
CREATE INDEX metrics_component_24 ON metrics (component_24) WHERE component_24 IS NOT NULL;
CREATE INDEX metrics_component_25 ON metrics (component_25) WHERE component_25 IS NOT NULL;
CREATE INDEX metrics_component_26 ON metrics (component_26) WHERE component_26 IS NOT NULL;
CREATE INDEX metrics_component_27 ON metrics (component_27) WHERE component_27 IS NOT NULL;
CREATE INDEX metrics_component_28 ON metrics (component_28) WHERE component_28 IS NOT NULL;
CREATE INDEX metrics_component_29 ON metrics (component_29) WHERE component_29 IS NOT NULL;
CREATE INDEX metrics_component_30 ON metrics (component_30) WHERE component_30 IS NOT NULL;
CREATE INDEX metrics_component_31 ON metrics (component_31) WHERE component_31 IS NOT NULL;
CREATE INDEX metrics_component_32 ON metrics (component_32) WHERE component_32 IS NOT NULL;
CREATE INDEX metrics_component_33 ON metrics (component_33) WHERE component_33 IS NOT NULL;
CREATE INDEX metrics_component_34 ON metrics (component_34) WHERE component_34 IS NOT NULL;
CREATE INDEX metrics_component_35 ON metrics (component_35) WHERE component_35 IS NOT NULL;
CREATE INDEX metrics_component_36 ON metrics (component_36) WHERE component_36 IS NOT NULL;
CREATE INDEX metrics_component_37 ON metrics (component_37) WHERE component_37 IS NOT NULL;
CREATE INDEX metrics_component_38 ON metrics (component_38) WHERE component_38 IS NOT NULL;
CREATE INDEX metrics_component_39 ON metrics (component_39) WHERE component_39 IS NOT NULL;
CREATE INDEX metrics_component_40 ON metrics (component_40) WHERE component_40 IS NOT NULL;
CREATE INDEX metrics_component_41 ON metrics (component_41) WHERE component_41 IS NOT NULL;
CREATE INDEX metrics_component_42 ON metrics (component_42) WHERE component_42 IS NOT NULL;
CREATE INDEX metrics_component_43 ON metrics (component_43) WHERE component_43 IS NOT NULL;
CREATE INDEX metrics_component_44 ON metrics (component_44) WHERE component_44 IS NOT NULL;
CREATE INDEX metrics_component_45 ON metrics (component_45) WHERE component_45 IS NOT NULL;
CREATE INDEX metrics_component_46 ON metrics (component_46) WHERE component_46 IS NOT NULL;
CREATE INDEX metrics_component_47 ON metrics (component_47) WHERE component_47 IS NOT NULL;
CREATE INDEX metrics_component_48 ON metrics (component_48) WHERE component_48 IS NOT NULL;
CREATE INDEX metrics_component_49 ON metrics (component_49) WHERE component_49 IS NOT NULL;
CREATE INDEX metrics_component_50 ON metrics (component_50) WHERE component_50 IS NOT NULL;
CREATE INDEX metrics_component_51 ON metrics (component_51) WHERE component_51 IS NOT NULL;
CREATE INDEX metrics_component_52 ON metrics (component_52) WHERE component_52 IS NOT NULL;
CREATE INDEX metrics_component_53 ON metrics (component_53) WHERE component_53 IS NOT NULL;
CREATE INDEX metrics_component_54 ON metrics (component_54) WHERE component_54 IS NOT NULL;
CREATE INDEX metrics_component_55 ON metrics (component_55) WHERE component_55 IS NOT NULL;
CREATE INDEX metrics_component_56 ON metrics (component_56) WHERE component_56 IS NOT NULL;
CREATE INDEX metrics_component_57 ON metrics (component_57) WHERE component_57 IS NOT NULL;
CREATE INDEX metrics_component_58 ON metrics (component_58) WHERE component_58 IS NOT NULL;
CREATE INDEX metrics_component_59 ON metrics (component_59) WHERE component_59 IS NOT NULL;
CREATE INDEX metrics_component_60 ON metrics (component_60) WHERE component_60 IS NOT NULL;
CREATE INDEX metrics_component_61 ON metrics (component_61) WHERE component_61 IS NOT NULL;
CREATE INDEX metrics_component_62 ON metrics (component_62) WHERE component_62 IS NOT NULL;
CREATE INDEX metrics_component_63 ON metrics (component_63) WHERE component_63 IS NOT NULL;
CREATE INDEX directories_parent ON directories (parent);
CREATE INDEX directories_component_0 ON directories (component_0) WHERE component_0 IS NOT NULL;
CREATE INDEX directories_component_1 ON directories (component_1) WHERE component_1 IS NOT NULL;
CREATE INDEX directories_component_2 ON directories (component_2) WHERE component_2 IS NOT NULL;
CREATE INDEX directories_component_3 ON directories (component_3) WHERE component_3 IS NOT NULL;
CREATE INDEX directories_component_4 ON directories (component_4) WHERE component_4 IS NOT NULL;
CREATE INDEX directories_component_5 ON directories (component_5) WHERE component_5 IS NOT NULL;
CREATE INDEX directories_component_6 ON directories (component_6) WHERE component_6 IS NOT NULL;
CREATE INDEX directories_component_7 ON directories (component_7) WHERE component_7 IS NOT NULL;
CREATE INDEX directories_component_8 ON directories (component_8) WHERE component_8 IS NOT NULL;
CREATE INDEX directories_component_9 ON directories (component_9) WHERE component_9 IS NOT NULL;
CREATE INDEX directories_component_10 ON directories (component_10) WHERE component_10 IS NOT NULL;
CREATE INDEX directories_component_11 ON directories (component_11) WHERE component_11 IS NOT NULL;
CREATE INDEX directories_component_12 ON directories (component_12) WHERE component_12 IS NOT NULL;
CREATE INDEX directories_component_13 ON directories (component_13) WHERE component_13 IS NOT NULL;
CREATE INDEX directories_component_14 ON directories (component_14) WHERE component_14 IS NOT NULL;
CREATE INDEX directories_component_15 ON directories (component_15) WHERE component_15 IS NOT NULL;
CREATE INDEX directories_component_16 ON directories (component_16) WHERE component_16 IS NOT NULL;
CREATE INDEX directories_component_17 ON directories (component_17) WHERE component_17 IS NOT NULL;
CREATE INDEX directories_component_18 ON directories (component_18) WHERE component_18 IS NOT NULL;
CREATE INDEX directories_component_19 ON directories (component_19) WHERE component_19 IS NOT NULL;
CREATE INDEX directories_component_20 ON directories (component_20) WHERE component_20 IS NOT NULL;
CREATE INDEX directories_component_21 ON directories (component_21) WHERE component_21 IS NOT NULL;
CREATE INDEX directories_component_22 ON directories (component_22) WHERE component_22 IS NOT NULL;
CREATE INDEX directories_component_23 ON directories (component_23) WHERE component_23 IS NOT NULL;
CREATE INDEX directories_component_24 ON directories (component_24) WHERE component_24 IS NOT NULL;
CREATE INDEX directories_component_25 ON directories (component_25) WHERE component_25 IS NOT NULL;
CREATE INDEX directories_component_26 ON directories (component_26) WHERE component_26 IS NOT NULL;
CREATE INDEX directories_component_27 ON directories (component_27) WHERE component_27 IS NOT NULL;
CREATE INDEX directories_component_28 ON directories (component_28) WHERE component_28 IS NOT NULL;
CREATE INDEX directories_component_29 ON directories (component_29) WHERE component_29 IS NOT NULL;
CREATE INDEX directories_component_30 ON directories (component_30) WHERE component_30 IS NOT NULL;
CREATE INDEX directories_component_31 ON directories (component_31) WHERE component_31 IS NOT NULL;
CREATE INDEX directories_component_32 ON directories (component_32) WHERE component_32 IS NOT NULL;
CREATE INDEX directories_component_33 ON directories (component_33) WHERE component_33 IS NOT NULL;
CREATE INDEX directories_component_34 ON directories (component_34) WHERE component_34 IS NOT NULL;
CREATE INDEX directories_component_35 ON directories (component_35) WHERE component_35 IS NOT NULL;
CREATE INDEX directories_component_36 ON directories (component_36) WHERE component_36 IS NOT NULL;
CREATE INDEX directories_component_37 ON directories (component_37) WHERE component_37 IS NOT NULL;
CREATE INDEX directories_component_38 ON directories (component_38) WHERE component_38 IS NOT NULL;
CREATE INDEX directories_component_39 ON directories (component_39) WHERE component_39 IS NOT NULL;
CREATE INDEX directories_component_40 ON directories (component_40) WHERE component_40 IS NOT NULL;
CREATE INDEX directories_component_41 ON directories (component_41) WHERE component_41 IS NOT NULL;
CREATE INDEX directories_component_42 ON directories (component_42) WHERE component_42 IS NOT NULL;
CREATE INDEX directories_component_43 ON directories (component_43) WHERE component_43 IS NOT NULL;
CREATE INDEX directories_component_44 ON directories (component_44) WHERE component_44 IS NOT NULL;
CREATE INDEX directories_component_45 ON directories (component_45) WHERE component_45 IS NOT NULL;
CREATE INDEX directories_component_46 ON directories (component_46) WHERE component_46 IS NOT NULL;
CREATE INDEX directories_component_47 ON directories (component_47) WHERE component_47 IS NOT NULL;
CREATE INDEX directories_component_48 ON directories (component_48) WHERE component_48 IS NOT NULL;
CREATE INDEX directories_component_49 ON directories (component_49) WHERE component_49 IS NOT NULL;
CREATE INDEX directories_component_50 ON directories (component_50) WHERE component_50 IS NOT NULL;
CREATE INDEX directories_component_51 ON directories (component_51) WHERE component_51 IS NOT NULL;
CREATE INDEX directories_component_52 ON directories (component_52) WHERE component_52 IS NOT NULL;
CREATE INDEX directories_component_53 ON directories (component_53) WHERE component_53 IS NOT NULL;
CREATE INDEX directories_component_54 ON directories (component_54) WHERE component_54 IS NOT NULL;
CREATE INDEX directories_component_55 ON directories (component_55) WHERE component_55 IS NOT NULL;
CREATE INDEX directories_component_56 ON directories (component_56) WHERE component_56 IS NOT NULL;
CREATE INDEX directories_component_57 ON directories (component_57) WHERE component_57 IS NOT NULL;
CREATE INDEX directories_component_58 ON directories (component_58) WHERE component_58 IS NOT NULL;
CREATE INDEX directories_component_59 ON directories (component_59) WHERE component_59 IS NOT NULL;
CREATE INDEX directories_component_60 ON directories (component_60) WHERE component_60 IS NOT NULL;
CREATE INDEX directories_component_61 ON directories (component_61) WHERE component_61 IS NOT NULL;
CREATE INDEX directories_component_62 ON directories (component_62) WHERE component_62 IS NOT NULL;
CREATE INDEX directories_component_63 ON directories (component_63) WHERE component_63 IS NOT NULL;
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('metrics',10);
COMMIT;
